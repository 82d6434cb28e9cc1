"""The one family of user-facing errors.

Everything a user can get wrong (a filter value, a DB URL, a Ray address, a run id,
a corrupt artifact) raises a ``FarmError`` subclass. The CLI prints it as one line
and exits non-zero; the web app maps ``http_status`` to a response.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable


class FarmError(Exception):
    """Base of every error the user should see as one readable line."""

    http_status = 400
    exit_code = 2


class UnknownName(FarmError):
    """A filter or argument named something that does not exist."""

    def __init__(self, kind: str, value: str, valid: Iterable[str]):
        valid = sorted(set(valid))
        near = difflib.get_close_matches(value, valid, n=4, cutoff=0.5)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        shown = ", ".join(valid[:12]) + (", ..." if len(valid) > 12 else "")
        super().__init__(f"unknown {kind} {value!r}{hint} (valid: {shown})")
        self.kind, self.value, self.nearest = kind, value, near


class BadDatabaseURL(FarmError):
    """The --db URL cannot be parsed or the database cannot be reached."""


class RunNotFound(FarmError):
    http_status = 404


class HarnessNotFound(FarmError):
    http_status = 404


class ArtifactCorrupt(FarmError):
    """A stored blob whose bytes no longer hash to its address."""

    http_status = 500


class ArtifactMismatch(FarmError):
    """Bytes offered for an address they do not hash to (a poisoned or damaged bundle)."""


class ArtifactNotFound(FarmError):
    http_status = 404


class UnknownFormatVersion(FarmError):
    """A stored artifact or bundle written by a format this farm cannot read."""


class ClusterError(FarmError):
    """Ray address that does not answer, or a request no node can satisfy."""


class CatalogMismatch(ClusterError):
    """A worker's catalog is not the driver's: the same fingerprint must mean the same harness."""


class Infeasible(ClusterError):
    """A --run-on device that no node of the cluster has."""


class StorageError(FarmError):
    """The disk filled up, the database stayed locked, or its server went away: nothing half-written."""


class ConfigError(FarmError):
    """A bad farm.toml or command-line combination."""


class BadJaxRepo(ConfigError):
    """A --jax-repo that is not a git repository, lacks the installed jax's tag, or lacks the file read at it."""
