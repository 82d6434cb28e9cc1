"""The one judge: every status that is a verdict (``fail``, ``expected_fail``,
``unexpected_pass``, ``crashed``, ``timeout``) is decided here, under one tolerance lookup.

Stages run things and say what happened (``ok``: it ran; ``error``: it raised;
``skipped``: nothing to do; ``not_runnable_here``: this backend cannot) with outputs,
metrics and facts; whether that is a pass is decided by one of these modules:

- ``tolerance``: the one tolerance lookup (a harness's, a stored artifact's, the invariant
  bound, the float64 reference's policy);
- ``kernel``: the one comparison kernel (which elements disagree under a band), which every
  numeric comparison below asks;
- ``outputs``: two output lists under a tolerance (compare, crossexec, round trip, replay);
- ``jaxpr``: a device's outputs against the harness's jaxpr evaluated in float64
  (``farm.reference``), invariants for non-unique results;
- ``harness``: which of those judges a catalog harness's native run, another platform's
  module run here, its round trip and another host's artifact (``xhost``: three ways);
- ``stored``: a replayed artifact against the outputs stored with it;
- ``stages``: what census, sharding and serialize found about a module;
- ``limitations``: the harness's known gaps as data (expected failures, stale limitations,
  a known crash);
- ``failures``: a job whose process died or hung.

``tests/test_judge_only.py`` checks that no other module sets a verdict status.
"""
