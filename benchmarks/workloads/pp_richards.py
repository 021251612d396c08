"""pyperformance ``bm_richards``: Martin Richards' OS task-scheduler simulation (classes, methods).

``Richards.run`` runs 10,000 idle-task steps (~60 ms); this builds the same task set from
the program's own classes, gives the idle task 1,000 steps, and resets the task list each
run so that every run does the same work.
"""

from __future__ import annotations

from ._pyperformance import load

NAME = "richards"
bm = load("richards")


def run() -> tuple[int, int]:
    bm.taskWorkArea = bm.TaskWorkArea()  # Richards.run keeps old tasks linked; start afresh
    idle = bm.IdleTaskRec()
    idle.count = 1000
    bm.IdleTask(bm.I_IDLE, 1, 1000, bm.TaskState().running(), idle)
    wkq = bm.Packet(bm.Packet(None, 0, bm.K_WORK), 0, bm.K_WORK)
    bm.WorkTask(bm.I_WORK, 1000, wkq, bm.TaskState().waitingWithPacket(), bm.WorkerTaskRec())
    for ident, prio, dev in ((bm.I_HANDLERA, 2000, bm.I_DEVA), (bm.I_HANDLERB, 3000, bm.I_DEVB)):
        wkq = None
        for _ in range(3):
            wkq = bm.Packet(wkq, dev, bm.K_DEV)
        bm.HandlerTask(ident, prio, wkq, bm.TaskState().waitingWithPacket(), bm.HandlerTaskRec())
    bm.DeviceTask(bm.I_DEVA, 4000, None, bm.TaskState().waiting(), bm.DeviceTaskRec())
    bm.DeviceTask(bm.I_DEVB, 5000, None, bm.TaskState().waiting(), bm.DeviceTaskRec())
    bm.schedule()
    return bm.taskWorkArea.holdCount, bm.taskWorkArea.qpktCount
