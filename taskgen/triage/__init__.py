"""Triage: one filter vocabulary for episodes (the run table, saved queues, the queue form) and the risk reasons that
rank judged successes for the false-positive audit and stratify a certificate."""
