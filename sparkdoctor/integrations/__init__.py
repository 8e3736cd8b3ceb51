"""sparkdoctor inside other tools: a layer above commands/, like cli.py. Nothing here is imported by sparkdoctor
itself; each module is loaded by the tool it plugs into (sparkrun_plugin by sparkrun's plugin loader) and runs
sparkdoctor's commands as subprocesses (preflight), never in that tool's process."""
