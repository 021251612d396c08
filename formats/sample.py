"""The program whose profile and timeline ``check_formats.py`` checks: calls a few levels
deep, repeated, in the main thread and in one other thread."""

import threading


def leaf(n: int) -> int:
    return sum(range(n))


def middle(n: int) -> int:
    return leaf(n) + leaf(n // 2)


def top(rounds: int) -> int:
    return sum(middle(2000 + i) for i in range(rounds))


def main() -> None:
    worker = threading.Thread(target=top, args=(20,), name="worker")
    worker.start()
    print(top(40))
    worker.join()


if __name__ == "__main__":
    main()
