"""The one codec of an ``Outcome`` between the worker that makes it and the store that writes it.

Every hop carries the typed ``farm.results.Outcome`` and turns it into bytes or JSON here, by
its own ``to_dict``/``from_dict`` schema: a Ray actor's chunks (``workers.chunks``), a child
process's pipe (the standalone worker's runner, the fuzz probe), a standalone worker's
journal and a results bundle. Nothing on the way reads an outcome as a dict (the bisect
probe's own report, ``workers.probe``, lists outcomes' dicts without their artifacts' bytes).

- ``pack``/``unpack``: outcomes as bytes (pickle of their dicts, artifacts' bytes raw:
  Ray passes bytes through without pickling each nested dict and buffer again);
- ``to_json``/``from_json``: one outcome as a JSON document (artifacts' bytes as base64).
  The worker's ``Stamp`` (pid, memory, environment) is for the driver: a journal or bundle
  keeps the environment in its header, never per outcome.
"""
from __future__ import annotations

import base64
import pickle
from collections.abc import Iterable, Mapping
from typing import Any

from farm.results import Outcome


def pack(outcomes: Iterable[Outcome]) -> bytes:
    """Outcomes as bytes (their order kept)."""
    return pickle.dumps([o.to_dict() for o in outcomes], protocol=pickle.HIGHEST_PROTOCOL)


def unpack(data: bytes) -> list[Outcome]:
    """``pack``'s outcomes, typed again."""
    return [Outcome.from_dict(d) for d in pickle.loads(data)]


def to_json(o: Outcome) -> dict[str, Any]:
    """``o`` as a JSON-able document, without its stamp; artifacts' bytes as base64."""
    d = o.to_dict()
    d.pop("stamp", None)
    for a in d["artifacts"]:
        a["data"] = base64.b64encode(a["data"]).decode()
    return d


def from_json(d: Mapping[str, Any]) -> Outcome:
    """An outcome from ``to_json``'s document, whose artifacts' data were base64-decoded by the
    schema's check (``farm.formats.bundle_schema.validate``), or still are base64 text."""
    arts = [{**a, "data": base64.b64decode(a["data"]) if isinstance(a["data"], str) else a["data"]}
            for a in d.get("artifacts", ())]
    return Outcome.from_dict({**d, "artifacts": arts})
