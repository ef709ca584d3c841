"""The validate stage: the judge measured against task verifiers or human labels."""
