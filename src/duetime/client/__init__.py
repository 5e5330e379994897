"""The public facade: App (client/app.py) and the tasks it registers (duetime/tasks.py)."""

from duetime.client.app import App
from duetime.tasks import AnyTask, Deferral, Task, misfit

__all__ = ["AnyTask", "App", "Deferral", "Task", "misfit"]
