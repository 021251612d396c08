"""Method-heavy OO simulation: predators and prey on a torus grid.

Inheritance with super(), properties, class/static methods, operator dunders on a
vector class, __eq__/__hash__ used by dicts, and a deterministic in-Python RNG.
"""

from __future__ import annotations

NAME = "oo_sim"


class Rng:
    """Linear congruential generator, so runs are deterministic and calls stay in Python."""

    def __init__(self, seed: int) -> None:
        self.state = seed

    def next(self) -> int:
        self.state = (self.state * 1103515245 + 12345) & 0x7FFFFFFF
        return self.state >> 16

    def choice(self, items: list[Vec]) -> Vec:
        return items[self.next() % len(items)]


class Vec:
    __slots__ = ("x", "y")
    SIZE = 24

    def __init__(self, x: int, y: int) -> None:
        self.x, self.y = x % Vec.SIZE, y % Vec.SIZE

    def __add__(self, other: Vec) -> Vec:
        return Vec(self.x + other.x, self.y + other.y)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vec) and self.x == other.x and self.y == other.y

    def __hash__(self) -> int:
        return self.x * 131 + self.y

    @staticmethod
    def directions() -> list[Vec]:
        return [Vec(1, 0), Vec(-1, 0), Vec(0, 1), Vec(0, -1)]


class Animal:
    max_energy = 10

    def __init__(self, pos: Vec, energy: int) -> None:
        self.pos = pos
        self._energy = energy

    @property
    def energy(self) -> int:
        return self._energy

    @energy.setter
    def energy(self, value: int) -> None:
        self._energy = min(value, self.max_energy)

    @property
    def alive(self) -> bool:
        return self._energy > 0

    def move(self, world: World) -> None:
        self.pos = self.pos + world.rng.choice(Vec.directions())
        self.energy -= 1

    def step(self, world: World) -> None:
        self.move(world)
        self.eat(world)

    def eat(self, world: World) -> None:
        raise NotImplementedError

    def offspring(self) -> Animal:
        self.energy //= 2
        return type(self)(self.pos, self.energy)


class Rabbit(Animal):
    max_energy = 6

    def eat(self, world: World) -> None:
        if world.grass.pop(self.pos, 0):
            self.energy += 3


class Fox(Animal):
    max_energy = 20

    @classmethod
    def spawn(cls, pos: Vec) -> Fox:
        return cls(pos, 20)

    def move(self, world: World) -> None:
        super().move(world)
        super().move(world)

    def eat(self, world: World) -> None:
        prey = world.rabbit_at(self.pos)
        if prey is not None:
            prey.energy = 0
            self.energy += 8


class World:
    def __init__(self, seed: int) -> None:
        self.rng = Rng(seed)
        cells = [Vec(x, y) for x in range(Vec.SIZE) for y in range(Vec.SIZE)]
        self.grass: dict[Vec, int] = {c: 1 for c in cells if self.rng.next() % 3 == 0}
        self.animals: list[Animal] = [Rabbit(self.rng.choice(cells), 5) for _ in range(40)]
        self.animals += [Fox.spawn(self.rng.choice(cells)) for _ in range(6)]

    def rabbit_at(self, pos: Vec) -> Animal | None:
        for a in self.animals:
            if isinstance(a, Rabbit) and a.alive and a.pos == pos:
                return a
        return None

    def tick(self) -> None:
        for a in self.animals:
            if a.alive:
                a.step(self)
        self.animals = [a for a in self.animals if a.alive]
        if len(self.animals) < 100:
            self.animals += [a.offspring() for a in self.animals if a.energy >= a.max_energy - 1]
        for _ in range(40):
            self.grass[Vec(self.rng.next(), self.rng.next())] = 1


def run() -> int:
    world = World(seed=42)
    for _ in range(15):
        world.tick()
    return sum(a.energy for a in world.animals) * 1000 + len(world.grass)
