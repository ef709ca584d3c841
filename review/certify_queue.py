"""The Certify queue of a run and judge config: the workbench serves the certificate's next episodes, in the design's
order (taskgen/stages/certify/), one reviewer at a time, and its page shows the certificate as it stands."""
from __future__ import annotations

from review.models import Queue
from taskgen.models import JudgeConfig, Run
from taskgen.stages.certify.service import CertifyParams, certificate_compute
from taskgen.triage.risk import risk_names_check

NEXT_SERVED = 50  # the design's next episodes a Certify queue offers at once (reviewers take them in turn)


def certify_queue_open(*, run: Run, judge_config: JudgeConfig, user, source: str = "judge", exclude_risk=(),
                       target: float = 0.9) -> Queue:
    """The run and config's Certify queue (made the first time; blind: a reviewer labels before seeing the judge),
    set to certify the export these parameters describe (checked first: CertifyError on bad values)."""
    certify = {"source": source, "exclude_risk": list(risk_names_check(exclude_risk)), "target": target}
    certify_params(Queue(run=run, judge_config=judge_config, certify=certify))  # refuses bad values before saving
    queue = Queue.objects.filter(kind=Queue.Kind.CERTIFY, run=run, judge_config=judge_config).first()
    if queue is None:
        queue = Queue.objects.create(kind=Queue.Kind.CERTIFY, run=run, judge_config=judge_config,
                                     name=f"Certify {run.name}", blind=True, created_by=user,
                                     filters={"runs": [run.pk]}, certify=certify)
    if queue.certify != certify:
        queue.certify = certify
        queue.save(update_fields=["certify"])
    return queue


def certify_params(queue: Queue) -> CertifyParams:
    data = queue.certify or {}
    return CertifyParams(run=queue.run, judge_config=queue.judge_config, source=data.get("source", "judge"),
                         exclude_risk=tuple(data.get("exclude_risk") or ()), target=float(data.get("target", 0.9)))


def certify_queue_certificate(queue: Queue, *, cuts: bool = False, next_count: int = NEXT_SERVED) -> dict:
    """The certificate the queue works towards, with its next episodes (kept on the queue object for this request:
    a take-next reads them twice)."""
    cached = getattr(queue, "_certificate", None)
    if cached is None or (cuts and "cuts" not in cached):
        cached = certificate_compute(params=certify_params(queue), next_count=next_count, cuts=cuts)
        queue._certificate = cached
    return cached


def certify_next_ids(queue: Queue) -> list[int]:
    return certify_queue_certificate(queue)["next_episode_ids"]
