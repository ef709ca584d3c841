"""The data model, one module per part: sites and tasks, runs and episodes with their evidence, judging, the
pipeline's runs and units, and the reviewers' labels. Every model is importable from here, as Django expects of an
app's `models`; the layers above read and write them, and nothing here imports a layer above.

Relations follow DESIGN.md: an Episode is one (run, task) attempt; a Judgment is one (episode, judge config) verdict;
a Label is one reviewer's verdict on one episode, every change kept.
"""
from taskgen.models.episodes import Blob, Episode, Run, Screenshot, VerifierResult
from taskgen.models.judging import (
    JudgeAnswer,
    JudgeBatchJob,
    JudgeBatchRequest,
    JudgeConfig,
    JudgeRateWindow,
    Judgment,
)
from taskgen.models.labels import (
    CertifyDesign,
    FinalLabel,
    FinalLabelChange,
    Label,
    LabelChange,
    LabelVerdict,
    ReviewerCheck,
)
from taskgen.models.pipeline import Export, ExportOrder, LabelRestoreLine, PipelineRun, WorkUnit
from taskgen.models.sites import INSTRUCTION_SORT_CHARS, ProposalBatch, Site, Task, TaskEdit
from taskgen.models.validate_summary import (
    EpisodeRisks,
    RiskDirtyEpisode,
    RunEpisodes,
    ValidateCell,
    ValidateDirtyEpisode,
    ValidateEpisodeCell,
)

__all__ = [
    "Blob", "CertifyDesign", "Episode", "EpisodeRisks", "Export", "ExportOrder", "FinalLabel", "FinalLabelChange",
    "INSTRUCTION_SORT_CHARS", "JudgeAnswer", "JudgeBatchJob", "JudgeBatchRequest", "JudgeConfig", "JudgeRateWindow",
    "Judgment", "Label", "LabelChange", "LabelRestoreLine", "LabelVerdict", "PipelineRun", "ProposalBatch",
    "ReviewerCheck", "RiskDirtyEpisode", "Run", "RunEpisodes", "Screenshot", "Site", "Task", "TaskEdit", "ValidateCell",
    "ValidateDirtyEpisode", "ValidateEpisodeCell", "VerifierResult", "WorkUnit",
]
