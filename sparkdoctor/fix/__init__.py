"""`sparkdoctor fix`: turn check's findings into a reviewed plan, apply it with a journal, prove it
worked by checking again, and roll it back byte for byte.

One module per stage, each saying its part; imports run one way (definitions -> plan -> journal -> apply).
Everything that touches the target goes through the Target protocol: scripts through run_script,
files through its file transport (sparkdoctor/targets/files.py), so `fix --container NAME` is the
same pipeline with a ContainerTarget. The journal always stays on this machine and records which
target it is of; the env file and the recipe named on the command line are this machine's files.
"""
