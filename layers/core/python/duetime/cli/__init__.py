"""The `duetime` command (main), its API client commands (client), the audit (audit) and the capacity planner."""
