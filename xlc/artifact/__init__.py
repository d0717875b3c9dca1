"""The serialized executable and the persistent compile cache, below `xlc.api`.

* `archive.py`: the `.xlc` zip read with every check before anything is decompressed;
* `manifest.py`: the pydantic manifest model (signature, allocations, target, members);
* `store.py`: what an `.xlc` stores, written (`build_archive`) and read back
  (`executable_from_archive`);
* `cache.py`: the persistent compile cache (`CompileOptions.cache_dir`).

Layering (tests/test_layering.py): this package imports neither `xlc.api` nor a backend
package; it reaches the backends only through `xlc.backends.get_backend(name)`.
"""
