"""The model zoo: architectures deploy builds and trains from scratch (no weights are downloaded)."""
