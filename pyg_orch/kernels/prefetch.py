"""A software prefetch for the Numba kernels (LLVM's ``llvm.prefetch``)."""

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def prefetch(typingctx, array, index):
    """Asks the CPU to bring ``array[index]`` into cache; no effect otherwise.

    Sampling reads a few entries at random places of arrays far larger than
    the caches; asking for the next ones while the current ones are used lets
    their memory latencies overlap. ``index`` must be in range.
    """

    def codegen(context, builder, signature, args):
        array_type = signature.args[0]
        view = context.make_array(array_type)(context, builder, args[0])
        pointer = cgutils.get_item_pointer(
            context, builder, array_type, view, [args[1]], wraparound=False
        )
        byte_pointer = ir.IntType(8).as_pointer()
        int32 = ir.IntType(32)
        function = cgutils.get_or_insert_function(
            builder.module,
            ir.FunctionType(ir.VoidType(), [byte_pointer, int32, int32, int32]),
            "llvm.prefetch.p0i8",
        )
        # A read, kept in all cache levels, of data.
        flags = [ir.Constant(int32, 0), ir.Constant(int32, 3), ir.Constant(int32, 1)]
        builder.call(function, [builder.bitcast(pointer, byte_pointer), *flags])
        return context.get_dummy_value()

    return types.void(array, index), codegen
