"""The protocol events every scheduler may log (``fabric.log.emit``); each scheduler's own are in its
package's ``events`` and its plug-in lists them."""

from fedemu.fabric.log import Event

JOB_UNSCHEDULABLE = Event("job_unschedulable", "warning", "a front end rejected a job at submission: the listed "
                          "tasks can run on no worker of the cluster")
FAILOVER = Event("failover", "info", "a component took over from a failed one: kind says how (standby: a "
                 "standby LM; failover: a second master; election: an elected member), epoch the new epoch, "
                 "failed the actor it replaced")
RELAUNCH = Event("relaunch", "info", "a task is launched again: it was lost with its worker (a crash, a restart, "
                 "a worker taken for down) or on the way to it")

COMMON_EVENTS = (JOB_UNSCHEDULABLE, FAILOVER, RELAUNCH)
