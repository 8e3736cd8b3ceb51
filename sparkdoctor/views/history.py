"""`history`'s view: the list, a run, a comparison or the page written draws itself (sparkdoctor/bench/history.py)."""

from sparkdoctor.bench.history import HistoryDocument
from sparkdoctor.views import self_drawn

VIEW = self_drawn(HistoryDocument)
