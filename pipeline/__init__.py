"""deploy: take a TensorFlow model from training to a TensorRT engine on an NVIDIA Jetson."""

__version__ = "0.1.0"
