"""The import stage: a reference run dir (tasks, episodes, judge files, verifier results) into the database."""
