"""duetime: a durable, distributed job scheduler, right about time, failure and duplication."""

from duetime.client import App, Task
from duetime.client.workflows import Group
from duetime.core.clock import Clock, ManualClock, SystemClock
from duetime.core.errors import (
    ArgsMismatch,
    BacklogFull,
    ConfigurationError,
    DuetimeError,
    IdempotencyConflict,
    IllegalTransition,
    InvalidRequest,
    JobFailed,
    JobNotFound,
    ResultTimeout,
    ScheduleExists,
    ScheduleNotFound,
    SchemaError,
    StaleAttempt,
    UnknownTask,
)
from duetime.core.models import Attempt, Job
from duetime.core.reconcile import Reconcile
from duetime.core.retry import ErrorCategory, PermanentError, Retry, RetryPolicy
from duetime.core.states import AttemptStatus, JobStatus
from duetime.core.workflows import Step, step
from duetime.runtime.context import AttemptContext, JobCancelled, current
from duetime.version import __version__ as __version__

__all__ = [
    "App",
    "ArgsMismatch",
    "Attempt",
    "AttemptContext",
    "AttemptStatus",
    "BacklogFull",
    "Clock",
    "ConfigurationError",
    "DuetimeError",
    "ErrorCategory",
    "Group",
    "IdempotencyConflict",
    "IllegalTransition",
    "InvalidRequest",
    "Job",
    "JobCancelled",
    "JobFailed",
    "JobNotFound",
    "JobStatus",
    "ManualClock",
    "PermanentError",
    "Reconcile",
    "ResultTimeout",
    "Retry",
    "RetryPolicy",
    "ScheduleExists",
    "ScheduleNotFound",
    "SchemaError",
    "StaleAttempt",
    "Step",
    "SystemClock",
    "Task",
    "UnknownTask",
    "current",
    "step",
]
