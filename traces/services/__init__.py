"""Trace writes, one module per topic.

- `ingest`: `spans_ingest`, a decoded OTLP batch stored at once (one statement, or one transaction);
- `outcomes`: `outcome_record`, a session's success or fail;
- `task_forming`: `tasks_form`, `quiet_sessions_form`, tasks and task groups of quiet sessions.
"""
