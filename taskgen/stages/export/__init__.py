"""The export stage (the reference's `rows`): approved episodes as a trainer's rows folder or a .tar.gz."""
