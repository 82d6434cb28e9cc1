"""A patched lowering rule, as an engineer testing a lowering change would load it."""

#: sin's lowering rule replaced by cosine's, the edit a patch would make.
PATCH = '''
def patch():
    from jax._src.interpreters import mlir
    from jax._src.lax import lax
    from jax._src.lib.mlir.dialects import hlo

    def _cos(ctx, x, accuracy):
        return lax._nary_lower_hlo(hlo.cosine, ctx, x, accuracy=accuracy)

    mlir.register_lowering(lax.sin_p, _cos)
'''

#: A sitecustomize that patches jax once it is imported (without importing it itself).
SITECUSTOMIZE = PATCH + '''
import importlib.machinery, sys


class _AfterJax:
    def find_spec(self, name, path=None, target=None):
        if name != "jax":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            patch()

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _AfterJax())
'''
