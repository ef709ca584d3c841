"""The attempt stage: a tasks file's episodes run in the browser harness, written as a run dir and imported."""
