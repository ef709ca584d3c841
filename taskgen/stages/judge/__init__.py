"""The judge stage: each episode's evidence shown to a judge model (or the offline rules), its verdict stored."""
