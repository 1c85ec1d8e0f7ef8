"""A synthetic dataset of drawn shapes (circle, cross, square, triangle) as PNG files.

    out_dir/train/<class>/<class>_0000.png ...
    out_dir/val/<class>/<class>_0000.png ...

Each image varies the shape's position, size and rotation, the shape and background colours,
a soft background gradient and mild pixel noise. Every image has its own random stream seeded
from (seed, split, class, index): the same arguments write byte-identical files, and a smaller
dataset is a prefix of a larger one. No TensorFlow here.
"""

import math
import os
import shutil
import uuid

import numpy as np
from PIL import Image, ImageDraw

from pipeline.errors import DeployError

CLASSES = ("circle", "cross", "square", "triangle")  # sorted: the label order of the index
_SUPERSAMPLE = 4  # draw the mask this many times larger, then box-filter down (anti-aliasing)


def _outline(name):
    """Polygon vertices (x, y) of a class's shape, centred on 0 with maximum radius 1."""
    if name == "cross":
        a = 0.3  # half the arm width
        pts = [(a, 1), (a, a), (1, a), (1, -a), (a, -a), (a, -1),
               (-a, -1), (-a, -a), (-1, -a), (-1, a), (-a, a), (-a, 1)]
        return np.array(pts) / math.hypot(1, a)
    first, sides = {"circle": (0, 48), "square": (math.pi / 4, 4), "triangle": (-math.pi / 2, 3)}[name]
    angles = first + np.arange(sides) * 2 * math.pi / sides
    return np.stack([np.cos(angles), np.sin(angles)], axis=1)


_OUTLINES = {name: _outline(name) for name in CLASSES}


def _colours(rs):
    """A shape colour and a background colour far enough apart to see the shape."""
    while True:
        fg, bg = rs.uniform(0, 255, size=(2, 3))
        if np.linalg.norm(fg - bg) >= 120:
            return fg, bg


def draw_shape(name, size, rs):
    """One image of class ``name``: uint8 [size, size, 3], drawn with RandomState ``rs``."""
    radius = rs.uniform(0.2, 0.45) * size
    turn = rs.uniform(0, 2 * math.pi)
    centre = rs.uniform(radius, size - radius, size=2)
    rotation = np.array([[math.cos(turn), -math.sin(turn)], [math.sin(turn), math.cos(turn)]])
    points = (_OUTLINES[name] @ rotation.T * radius + centre) * _SUPERSAMPLE
    big = size * _SUPERSAMPLE
    mask = Image.new("L", (big, big), 0)
    ImageDraw.Draw(mask).polygon([tuple(p) for p in points.tolist()], fill=255)
    alpha = np.asarray(mask.resize((size, size), Image.BOX), dtype=np.float32)[..., None] / 255

    fg, bg = _colours(rs)
    slope, direction = rs.uniform(-40, 40), rs.uniform(0, 2 * math.pi)
    yy, xx = (np.mgrid[0:size, 0:size] + 0.5) / size - 0.5
    background = bg + (slope * (xx * math.cos(direction) + yy * math.sin(direction)))[..., None]
    noise = rs.normal(0, rs.uniform(2, 8), size=(size, size, 3))
    image = background * (1 - alpha) + fg * alpha + noise
    return np.clip(np.rint(image), 0, 255).astype(np.uint8)


def _check_int(name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not low <= value <= high:
        raise DeployError(f"shapes dataset: {name} must be a whole number from {low} to {high}, "
                          f"got {value!r}")


def generate_shapes(out_dir, image_size=96, train_per_class=60, val_per_class=20, seed=0):
    """Write the shapes dataset into ``out_dir`` (built beside it, then renamed into place).

    Returns {classes, train, val, image_size, path}; train and val are image counts.
    """
    _check_int("image_size", image_size, 8, 4096)
    _check_int("train_per_class", train_per_class, 1, 100_000)
    _check_int("val_per_class", val_per_class, 0, 100_000)
    _check_int("seed", seed, 0, 2**32 - 1)
    out_dir = os.path.abspath(os.fspath(out_dir))
    if os.path.exists(out_dir):
        if not os.path.isdir(out_dir):
            raise DeployError(f"{out_dir} is a file; choose a folder path for the generated dataset")
        if os.listdir(out_dir):
            raise DeployError(f"output folder {out_dir} already exists and is not empty; "
                              "remove it or choose another folder")
    parent, base = os.path.split(out_dir)
    tmp = os.path.join(parent, f".{base}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        os.makedirs(tmp)
        for split_i, (split, count) in enumerate((("train", train_per_class), ("val", val_per_class))):
            for class_i, name in enumerate(CLASSES if count else ()):
                folder = os.path.join(tmp, split, name)
                os.makedirs(folder)
                for i in range(count):
                    rs = np.random.RandomState([seed, split_i, class_i, i])
                    image = Image.fromarray(draw_shape(name, image_size, rs))
                    # no metadata or timestamps: same pixels -> same bytes
                    image.save(os.path.join(folder, f"{name}_{i:04d}.png"), format="PNG",
                               compress_level=1)
        if os.path.isdir(out_dir):
            os.rmdir(out_dir)  # empty, checked above
        os.rename(tmp, out_dir)
    except OSError as e:
        raise DeployError(f"cannot write the shapes dataset to {out_dir} ({e.strerror or e}); "
                          "check the folder is writable and the disk has space") from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {
        "classes": list(CLASSES),
        "train": train_per_class * len(CLASSES),
        "val": val_per_class * len(CLASSES),
        "image_size": image_size,
        "path": out_dir,
    }
