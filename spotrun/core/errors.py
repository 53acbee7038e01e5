"""The one error family of spotrun.

Every error a user can meet is a SpotrunError whose message says what went wrong and, where
there is one, what to do. The CLI prints `error: <message>` on one line and exits with the
error's `exit_code`; nothing else in the code base catches errors to hide them.
"""

from __future__ import annotations


class SpotrunError(Exception):
    """Root of every error spotrun raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(message if hint is None else f"{message} ({hint})")

    def user_message(self) -> str:
        return self.message if self.hint is None else f"{self.message}; {self.hint}"


class UsageError(SpotrunError):
    """The user asked for something that cannot be done as asked (bad flag, key or value)."""

    exit_code = 2


class CredentialsError(UsageError):
    """No usable cloud credentials: none found, half set, or a profile that does not exist."""


class NotFoundError(UsageError):
    """A run, recipe, sweep or file the user named does not exist (or is ambiguous)."""


class StateError(SpotrunError):
    """An action does not fit the run's state (illegal transition, attach to a finished run)."""


class LedgerError(SpotrunError):
    """The local state under SPOTRUN_HOME cannot be read or written."""


class LedgerWriteError(LedgerError):
    """The ledger cannot be written now (read-only, disk full, I/O error): a fault of this
    machine, waited out like a busy ledger and never a reason to end a run's instances."""


class LedgerBusyError(LedgerError):
    """Another process kept the ledger locked past the wait's bound: transient, never a
    reason to tear a run down (spotrun.store.ledger waits, the controller tries its step again)."""


class CloudError(SpotrunError):
    """The cloud refused or failed a request."""


class CapacityError(CloudError):
    """No offer could be filled (capacity, a spot price too low, a zone without the type)."""


class QuotaError(CloudError):
    """An account quota or permission stands in the way; the message names which to raise."""


class VcpuQuotaError(QuotaError):
    """The account's vCPU quota `quota` cannot hold the request: offers under another quota
    may still fit, and the hint is the request that raises this one."""

    def __init__(self, message: str, *, quota: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.quota = quota


class PricingError(SpotrunError):
    """A cost cannot be computed: a price history is empty or does not reach back far enough."""


class RemoteError(SpotrunError):
    """An instance could not be reached or a command on it failed."""


class RemoteCommandError(RemoteError):
    """The instance answered, but a command there failed (its exit code) or its answer was
    garbled: it is not silent, and waiting for it to answer again changes nothing."""


class LocalFileError(SpotrunError):
    """A file cannot be written on this machine (a name or path too long here, a folder where
    a file should go, a full or read-only disk): the laptop's fault, never the instance's."""


class DataError(SpotrunError):
    """A data set is damaged, incomplete, or does not fit where it must be staged."""


class TrainingError(SpotrunError):
    """The trainer cannot continue: a bad method combination, an incompatible checkpoint."""


class UnsafePathError(DataError):
    """A name from outside data (a bucket key, a manifest, a tar member, an instance's file
    listing) would land outside the folder it belongs in."""
