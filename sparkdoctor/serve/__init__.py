"""Serving: launch the server a recipe describes, watch its log for known problems, tear it down.

Modules, each importing only those above it:
  logscan    match_line(): a log line against the matrix entries' symptoms; symptom_entries(): those that list some
  binding    free_port(), rebind(): 127.0.0.1 on a free port, whatever the recipe says; exposed(): proof it kept to it (every port)
  groups     terminate(): SIGTERM, grace, SIGKILL to a process group, then proof from /proc
  reaper     a child subreaper while a local server runs; at teardown, what it started outside its group
  readiness  GET /health, else /v1/models
  logpump    output -> log file, line by line, scanned as it arrives
  ending     a server's end in one line: its exit, its last log line, the known problems matched
  container_launch  a recipe that names a container: `run -d --init`, `logs -f`, `stop` then `rm`, leftovers swept
  launch     launch(): the context manager the bench uses (a local process group, or the container above)
"""

from sparkdoctor.serve.launch import LaunchError, Server, launch
from sparkdoctor.serve.logscan import Hit, match_line, symptom_entries

__all__ = ["Hit", "LaunchError", "Server", "launch", "match_line", "symptom_entries"]
