"""The probes' compiled modules in sparkdoctor's own cache folder, where a damaged one is compiled again.

A probe runs with -B; sparkdoctor may name a folder of its cache (SPARKDOCTOR_PROBE_PYCACHE) as the interpreter's
pycache_prefix: compiling the probe's modules (and the standard library's it imports: under a prefix, Python looks
for every module's .pyc there) again on every run cost ~20% of a warm probe. Python trusts a .pyc whose header
matches its source (mtime and size) and unmarshals the rest: a .pyc whose body is damaged (a bad block, or a write
cut short on a full disk: importlib keeps a short write) fails every import of that module, so the probe would fail
on every run until someone deleted the file. Here such a file is removed and the module compiled from its source
(and written again): a damaged cache entry costs one compile, never the probe.

Standard library only, Python 3.6+ (pycache_prefix is 3.8+: older ones run without the cache). The probe's
__main__.py imports this module before it names the cache folder, so it is always read from its source.
"""

import os
import sys
from importlib.machinery import (
    BYTECODE_SUFFIXES,
    EXTENSION_SUFFIXES,
    SOURCE_SUFFIXES,
    ExtensionFileLoader,
    FileFinder,
    SourceFileLoader,
    SourcelessFileLoader,
)
from importlib.util import cache_from_source


class _Loader(SourceFileLoader):
    def get_code(self, fullname):
        try:
            return super(_Loader, self).get_code(fullname)
        except (EOFError, ValueError, TypeError, ImportError):  # marshal's errors on a damaged body; "non-code object"
            try:
                os.unlink(cache_from_source(self.path))
            except OSError:
                pass
            return super(_Loader, self).get_code(fullname)  # from the source now: a real error is raised again


def source_loader(name, path):
    """The loader of a module read from a file by its path (importlib.util.spec_from_file_location's `loader`)."""
    return _Loader(name, path)


# Python's own file finder (a folder on sys.path: extension modules, sources, bare .pyc), with the loader above for sources
_HOOK = FileFinder.path_hook((ExtensionFileLoader, EXTENSION_SUFFIXES), (_Loader, SOURCE_SUFFIXES),
                             (SourcelessFileLoader, BYTECODE_SUFFIXES))


def use(prefix):
    """Keep compiled modules under `prefix` (nothing when it is empty), compiling a damaged one again."""
    if not prefix or not hasattr(sys, "pycache_prefix") or _HOOK in sys.path_hooks:
        return
    sys.path_hooks.insert(0, _HOOK)  # a zip on sys.path is not a folder: the hook declines it, zipimport takes it
    sys.path_importer_cache.clear()  # the finders made before the hook
    sys.pycache_prefix = prefix
    sys.dont_write_bytecode = False
