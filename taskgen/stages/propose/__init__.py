"""The propose stage: tasks for each website from its pages, controls and text, waiting for a human's review."""
