"""What a certificate can be asked for (the sources whose choice it certifies, a "certified at least" target) and
the error a certificate that cannot be computed raises: light, so the export stage and every `taskgen` command's
parser read them without loading the certificate's statistics (numpy, 12 MB of every process that registers the
stages), which load with the first certificate computed."""
from __future__ import annotations

from taskgen.models import Export

SOURCES = (Export.Selection.JUDGE, Export.Selection.HUMAN_OVER_JUDGE)  # a certificate is of the judge's choice

class CertifyError(ValueError):
    """A certificate that cannot be computed as asked (bad target, source, cut, judge config); the message says why."""


def certify_target_check(value: object) -> float | None:
    """A form's or command line's "certified at least": None when empty, else a share between 0 and 1."""
    if value in (None, ""):
        return None
    try:
        target = float(str(value).strip())
    except ValueError:
        raise CertifyError(f"certified at least must be a share between 0 and 1 (0.9 for 90%), not {value!r}") from None
    if not 0 < target < 1:
        raise CertifyError(f"certified at least must be a share between 0 and 1 (0.9 for 90%), not {value!r}")
    return target
