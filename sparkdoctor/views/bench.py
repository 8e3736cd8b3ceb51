"""`bench`'s view: a run, a comparison or a reproduction draws itself (sparkdoctor/bench/document.py)."""

from sparkdoctor.bench.document import BenchDocument
from sparkdoctor.views import self_drawn

VIEW = self_drawn(BenchDocument)
