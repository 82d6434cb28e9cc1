"""ORM models, one module per table."""
from farm.store.models.accuracy import AccuracyRow
from farm.store.models.acknowledgement import AcknowledgementRow
from farm.store.models.artifact import ARTIFACT_KINDS, ArtifactRow
from farm.store.models.base import Base
from farm.store.models.code_deps import CodeDepsRow
from farm.store.models.environment import Environment
from farm.store.models.harness import HarnessRow
from farm.store.models.outcome import OUTCOME_FIELDS, OutcomeRow, StoredOutcomeRow
from farm.store.models.report import ReportRow
from farm.store.models.result import RESULT_FIELDS, ResultRow, StoredResultRow
from farm.store.models.run import RUN_KINDS, RUN_STATUSES, Run

__all__ = ["AccuracyRow", "AcknowledgementRow", "ARTIFACT_KINDS", "ArtifactRow", "Base", "CodeDepsRow", "Environment", "HarnessRow", "OutcomeRow",
           "OUTCOME_FIELDS", "ReportRow", "RESULT_FIELDS", "ResultRow", "RUN_KINDS", "RUN_STATUSES", "Run",
           "StoredOutcomeRow", "StoredResultRow"]
