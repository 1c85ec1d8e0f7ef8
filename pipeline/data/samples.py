"""Sample inputs for numeric checks (convert's comparison, rewrite passes, batch consistency, benchmarks):
real images from an image folder when there is one, else seeded random pixels. No TensorFlow."""

from pathlib import Path

from pipeline.errors import DeployError


def sample_images(dataset, count, size, seed=0, channels=3):
    """(images float32 [N, H, W, C] in 0..255, source text). ``dataset``: an image folder (one
    subfolder per class, val/ images first; or any images under it; RGB) or None for random pixels."""
    import numpy as np

    from pipeline.data.folder import IMAGE_EXTENSIONS, image_hw, index_image_folder, load_images

    h, w = image_hw(size)
    if dataset is None:
        return (np.random.RandomState(seed).uniform(0, 255, (count, h, w, channels)).astype("float32"),
                "random pixels, seed {}".format(seed))
    if channels != 3:
        raise DeployError("the model takes {} channels; images from {} are RGB (3)".format(channels, dataset))
    try:
        index = index_image_folder(dataset, verify=False)
        paths = [p for p, _ in index.val + index.train]
    except DeployError:  # not one subfolder per class: any images under the folder
        paths = sorted(str(p) for p in Path(dataset).rglob("*") if p.suffix.lower() in IMAGE_EXTENSIONS
                       and not any(part.startswith(".") for part in p.parts))
        if not paths:
            raise
    images = load_images(paths[:count], (h, w))
    return images, "dataset {} ({} image{})".format(dataset, len(images), "" if len(images) == 1 else "s")
