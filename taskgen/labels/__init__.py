"""The reviewers' labels as the layers above use them: the final-label rule, the one check every label field passes,
writing a label or a final label with its history under the episode's lock, reviewers' accuracy on known-truth checks,
and the labels backup format. The review pages call these; the stages (export, certify, validate, the labels restore)
read through them; nothing here imports either."""
