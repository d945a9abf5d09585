"""The labels a backend puts on what it makes, so sandboxes, volumes and images are found again
by label (a lost worker's sandbox is reaped by its run id, an instance's leftovers by its
instance). A leaf: every module of the package may import it."""

LABEL_RUN_ID = "belvedir.run_id"
LABEL_MANAGED = "belvedir.managed"
LABEL_INSTANCE = "belvedir.instance"
LABEL_TASK_SANDBOX = "belvedir.task_sandbox"  # a managed Harbor run's task container: its id
LABEL_WARM = "belvedir.warm"  # a pool member: its pool's key (the shape and the engine)
LABEL_WARM_ENGINE = "belvedir.warm_engine"  # the worker host's engine that keeps it
