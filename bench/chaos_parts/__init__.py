"""The chaos soak's parts (bench/chaos.py runs it): its processes and faults, its load and checks, the soak itself."""
