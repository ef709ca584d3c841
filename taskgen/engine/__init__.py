"""The pipeline engine: starts, runs, cancels and resumes the stages' work."""
