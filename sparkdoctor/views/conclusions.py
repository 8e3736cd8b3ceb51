"""`conclusions`' view: the conclusions judged draw themselves (sparkdoctor/conclusions/documents.py)."""

from sparkdoctor.conclusions.documents import ConclusionsDocument
from sparkdoctor.views import self_drawn

VIEW = self_drawn(ConclusionsDocument)
