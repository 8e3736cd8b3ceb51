"""`sparkdoctor diff`: drift between two Facts snapshots (two nodes, or one box before and after an
upgrade), field by field, with a verdict per difference: risky for a multi-node run, or benign.

compare.py walks the fields, rules.py holds the verdicts (data), document.py is the answer (versioned
JSON); sparkdoctor/views/diff.py prints it for people. The basis of a fleet view: N snapshots are N-1 diffs against a reference node.
"""
