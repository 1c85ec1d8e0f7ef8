"""Dataset indexing and validation: image folders and TFRecord files. No TensorFlow at import.

Image folder layouts (classes are the subfolder names, sorted; labels index into them):
  (a) path/train/<class>/* and path/val/<class>/* (or path/validation/<class>/*); with no val
      folder, train/ is split by val_split as in (b);
  (b) path/<class>/*, split per class into train/val by val_split (see ``_split``).
Images are .png .jpg .jpeg .bmp .gif (any case), searched recursively in a class folder; other
files, and files and folders whose names start with ".", are ignored.

TFRecords: the validation split is taken by record index (``pipeline.data.tfdata.is_val_record``);
``index_tfrecords`` only counts: val_count = floor(count * val_split).
"""

import glob
import hashlib
import io
import math
import os
import re
from dataclasses import dataclass
from typing import List, Tuple

import numpy as np
from PIL import Image

from pipeline.errors import DeployError

IMAGE_EXTENSIONS = (".png", ".jpg", ".jpeg", ".bmp", ".gif")
_DECODABLE = {"PNG", "JPEG", "MPO", "BMP", "GIF"}  # PIL formats tf.io.decode_image reads


@dataclass
class DatasetIndex:
    classes: List[str]
    train: List[Tuple[str, int]]  # (absolute image path, label)
    val: List[Tuple[str, int]]
    source: str


@dataclass
class TFRecordIndex:
    files: List[str]
    num_classes: int
    count: int  # records in all files
    image_key: str = "image/encoded"
    label_key: str = "image/class/label"
    val_split: float = 0.0
    val_count: int = 0  # == floor(count * val_split)
    source: str = ""

    @property
    def classes(self):
        return [str(i) for i in range(self.num_classes)]

    @property
    def train_count(self):
        return self.count - self.val_count


def image_hw(image_size):
    """(height, width) from an int or a (height, width) pair."""
    if isinstance(image_size, (int, np.integer)):
        return int(image_size), int(image_size)
    height, width = image_size
    return int(height), int(width)


def _check_val_split(val_split):
    if isinstance(val_split, bool) or not isinstance(val_split, (int, float)) \
            or not 0 <= val_split < 1:
        raise DeployError(f"val_split must be at least 0 and less than 1, got {val_split!r}; e.g. 0.2")


def _walk(root):
    """Relative paths ("/"-separated) of the files under ``root``, hidden ones skipped, sorted."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        rel = os.path.relpath(folder, root).replace(os.sep, "/")
        found += [f if rel == "." else f"{rel}/{f}" for f in files if not f.startswith(".")]
    return sorted(found)


def _is_image(name):
    return name.lower().endswith(IMAGE_EXTENSIONS)


def _scan_classes(folder, min_classes=2):
    """{class name: [absolute image paths]} for the class subfolders of ``folder``."""
    entries = sorted(os.listdir(folder))
    names = [n for n in entries if not n.startswith(".") and os.path.isdir(os.path.join(folder, n))]
    if not names:
        loose = any(map(_is_image, entries)) and " (images must be inside one subfolder per class)"
        raise DeployError(f"dataset folder {folder} has no class subfolders{loose or ''}; put images "
                          f"in {folder}/<class>/ or {folder}/train/<class>/ and {folder}/val/<class>/")
    classes = {}
    for name in names:
        class_dir = os.path.join(folder, name)
        classes[name] = [os.path.join(class_dir, f) for f in _walk(class_dir) if _is_image(f)]
        if not classes[name]:
            raise DeployError(f"dataset folder {class_dir} has no images "
                              f"({'/'.join(IMAGE_EXTENSIONS)}); add images or remove the folder")
    if len(classes) < min_classes:
        raise DeployError(f"dataset folder {folder} has only 1 class ({names[0]}); "
                          "a classifier needs at least 2 class subfolders")
    return classes


def _split(classes, folder, val_split, seed):
    """Stratified, deterministic split. A class of n images gives round(n * val_split) to val
    (at least 1 when val_split > 0, and always leaving 1 for train): the images with the lowest
    sha256 of (seed, path relative to ``folder``), so adding an image moves few others."""
    train, val = {}, {}
    for name, images in classes.items():
        n = len(images)
        k = min(n - 1, max(int(math.floor(n * val_split + 0.5)), 1 if val_split > 0 else 0))
        rank = sorted(images, key=lambda f: hashlib.sha256(
            f"{seed}\0{os.path.relpath(f, folder)}".encode()).hexdigest())
        chosen = set(rank[:k])
        train[name] = [f for f in images if f not in chosen]
        val[name] = [f for f in images if f in chosen]
    return train, val


def _check_image(data, what, action):
    """Raise a DeployError unless ``data`` (a path or file object) is an image TensorFlow decodes."""
    try:
        with Image.open(data) as im:
            kind = im.format
            im.verify()
        if kind in ("JPEG", "MPO"):  # verify() skips JPEG data: decode it, at 1/8 scale (cheap)
            if hasattr(data, "seek"):
                data.seek(0)
            with Image.open(data) as im:
                im.draft("RGB", (1, 1))
                im.load()
    except Exception as e:  # PIL raises many types for bad files
        reason = ("not an image, or an unknown format" if isinstance(e, Image.UnidentifiedImageError)
                  else (str(e).splitlines() or [type(e).__name__])[0][:120])
        raise DeployError(f"{what} is not a readable image ({reason}); {action}") from e
    if kind not in _DECODABLE:
        raise DeployError(f"{what} is a {kind} image, which TensorFlow cannot decode; "
                          "convert it to PNG or JPEG")


def index_image_folder(path, val_split=0.2, seed=0, verify=True):
    """Index a folder of images, one subfolder per class (layouts in the module docstring)."""
    root = os.path.abspath(os.fspath(path))
    if not os.path.exists(root):
        raise DeployError(f"dataset folder {root} does not exist; check the dataset path")
    if not os.path.isdir(root):
        raise DeployError(f"dataset path {root} is not a folder; point it at a folder "
                          "with one subfolder of images per class")
    _check_val_split(val_split)
    train_dir = os.path.join(root, "train")
    val_dir = next(filter(os.path.isdir, (os.path.join(root, n) for n in ("val", "validation"))), None)
    if not os.path.isdir(train_dir):
        train, val = _split(_scan_classes(root), root, val_split, seed)
    elif val_dir is None:
        train, val = _split(_scan_classes(train_dir), train_dir, val_split, seed)
    else:
        train, val = _scan_classes(train_dir), _scan_classes(val_dir, min_classes=0)
        missing, extra = sorted(set(train) - set(val)), sorted(set(val) - set(train))
        if missing or extra:
            diff = "; ".join(f"{what}: {', '.join(names)}" for what, names in
                             (("missing in val", missing), ("only in val", extra)) if names)
            raise DeployError(f"dataset folder {val_dir} has different classes from {train_dir} "
                              f"({diff}); give both the same class subfolders")
    classes = sorted(train)
    index = DatasetIndex(classes=classes, source=root,
                         train=[(f, y) for y, name in enumerate(classes) for f in train[name]],
                         val=[(f, y) for y, name in enumerate(classes) for f in val[name]])
    if verify:
        for f, _ in index.train + index.val:
            _check_image(f, f"image file {f}", "delete or replace it")
    return index


def _tfrecord_files(paths_or_glob):
    """Absolute paths of the files named by a file, folder or glob, or a list of them."""
    specs = [paths_or_glob] if isinstance(paths_or_glob, (str, os.PathLike)) else list(paths_or_glob)
    files = []
    for spec in map(os.fspath, specs):
        if os.path.isdir(spec):
            matched = [os.path.join(spec, f) for f in _walk(spec) if "/" not in f]
        else:
            matched = [spec] if os.path.isfile(spec) else sorted(glob.glob(spec))
            matched = list(filter(os.path.isfile, matched))
        if not matched:
            raise DeployError(f"no TFRecord files match {spec}; check the path or glob pattern")
        files += [f for f in map(os.path.abspath, matched) if f not in files]
    if not files:
        raise DeployError("no TFRecord files given; pass a file, folder or glob pattern")
    return files


def _check_example(example, where, image_key, label_key, num_classes):
    """(encoded image, label) of a tf.train.Example, or a DeployError saying what is wrong."""
    features = example.features.feature
    for key, kind, arg in ((image_key, "bytes_list", "image_key"),
                           (label_key, "int64_list", "label_key")):
        if key not in features:
            have = ", ".join(sorted(features)) or "no features"
            raise DeployError(f"{where} has no feature '{key}' (it has: {have}); "
                              f"set {arg} to the feature that holds the {arg[:-4]}")
        if features[key].WhichOneof("kind") != kind or len(getattr(features[key], kind).value) != 1:
            raise DeployError(f"{where}: feature '{key}' must hold one {kind[:-5]} value; "
                              f"set {arg} to the right feature")
    label = features[label_key].int64_list.value[0]
    if label < 0 or (num_classes is not None and label >= num_classes):
        allowed = "0 or more" if num_classes is None else f"0 to {num_classes - 1} (num_classes)"
        raise DeployError(f"{where} has label {label}; labels must be {allowed}: fix the labels")
    return features[image_key].bytes_list.value[0], label


def index_tfrecords(paths_or_glob, val_split=0.2, image_key="image/encoded",
                    label_key="image/class/label", num_classes=None, verify=True):
    """Index TFRecord files of tf.train.Example (a file, folder, glob, or a list of them): read
    every record once, check its features and label (with verify, that its image decodes)."""
    import tensorflow as tf
    from google.protobuf.message import DecodeError

    _check_val_split(val_split)
    files = _tfrecord_files(paths_or_glob)
    count, seen = 0, set()
    for f in files:
        i = 0
        try:
            for batch in tf.data.TFRecordDataset(f).batch(256):
                for raw in batch.numpy():
                    where = f"TFRecord file {f} record {i}"
                    example = tf.train.Example.FromString(raw)
                    image, label = _check_example(example, where, image_key, label_key, num_classes)
                    if verify:
                        _check_image(io.BytesIO(image), f"{where} '{image_key}'", "re-create it")
                    count, i = count + 1, i + 1
                    seen.add(label)
        except DecodeError:
            raise DeployError(f"TFRecord file {f} record {i} is not a tf.train.Example; "
                              "re-create the file") from None
        except tf.errors.OpError as e:
            reason = re.sub(r"\{\{.*?\}\}|\[Op:.*", "", e.message or "").strip().splitlines()
            reason = (reason or [type(e).__name__])[0][:120]
            problem = "is corrupt or not a TFRecord file" if isinstance(e, tf.errors.DataLossError) \
                else "cannot be read"
            raise DeployError(f"TFRecord file {f} {problem} ({reason}); "
                              "re-create it or remove it from the dataset") from None
    single = isinstance(paths_or_glob, (str, os.PathLike))
    source = os.fspath(paths_or_glob) if single else ", ".join(files)
    if count == 0:
        raise DeployError(f"TFRecord files {source} hold no records; check the path")
    if len(seen) < 2:
        raise DeployError(f"TFRecord files {source} have only 1 class (label {seen.pop()}); a "
                          "classifier needs at least 2 classes: check label_key and the labels")
    num_classes = max(seen) + 1 if num_classes is None else num_classes
    return TFRecordIndex(files=files, num_classes=num_classes, count=count, image_key=image_key,
                         label_key=label_key, val_split=float(val_split),
                         val_count=math.floor(count * float(val_split)), source=source)


def load_images(paths, image_size):
    """Images as float32 [N, H, W, 3], raw 0..255 RGB, resized with PIL bilinear (alpha dropped,
    first frame of an animation): real sample inputs for numeric checks, without TensorFlow."""
    height, width = image_hw(image_size)
    out = np.empty((len(paths), height, width, 3), dtype=np.float32)
    for i, path in enumerate(paths):
        try:
            with Image.open(path) as im:
                rgb = im if im.mode == "RGB" else im.convert("RGBA").convert("RGB")
                out[i] = np.asarray(rgb.resize((width, height), Image.BILINEAR), dtype=np.float32)
        except (OSError, SyntaxError, ValueError) as e:
            raise DeployError(f"image file {path} is not a readable image "
                              f"({(str(e).splitlines() or [type(e).__name__])[0][:120]}); "
                              "delete or replace it") from e
    return out


def fingerprint_dataset(path):
    """sha256 over (relative path, size, mtime_ns) of every non-hidden file under ``path`` (a
    folder, a file or a glob), sorted: a cheap cache key that changes when a file changes."""
    spec = os.fspath(path)
    if os.path.isdir(spec):
        entries = [(rel, os.path.join(spec, rel)) for rel in _walk(spec)]
    else:
        entries = [(f, f) for f in ([spec] if os.path.isfile(spec) else sorted(glob.glob(spec)))
                   if os.path.isfile(f)]
        if not entries:
            raise DeployError(f"dataset path {spec} does not exist; check the dataset path")
    digest = hashlib.sha256()
    for rel, full in entries:
        st = os.stat(full)
        digest.update(f"{rel}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()
