"""`rerun`'s view: the plan or what was rerun draws itself (sparkdoctor/conclusions/documents.py)."""

from sparkdoctor.conclusions.documents import RerunDocument
from sparkdoctor.views import self_drawn

VIEW = self_drawn(RerunDocument)
