"""Running sweeps: the Ray sweep and its workers' glue, schedules, bundles for hosts
without Ray, and the environment a run records."""
