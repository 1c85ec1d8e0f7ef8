"""export: the inference graph (training=False) as a SavedModel with a named, dynamic-batch signature."""

from pipeline.stages import stage


@stage("export", inputs={"keras_model": "train"}, outputs={"saved_model": "saved_model", "signature": "signature.json"}, version=1,
       tools=("tensorflow", "keras"))
def export(ctx):
    """Rebuild the model for inference and save it as a SavedModel (byte-identical for the same model)."""
    from pipeline.files import write_json
    from pipeline.tf.export import export_saved_model

    sig = export_saved_model(ctx.inputs["keras_model"], ctx.output("saved_model"),
                             ctx.options.input_name, ctx.options.output_name)
    write_json(ctx.output("signature"), sig, final_newline=False)  # the bytes it always had
    i, o = sig["inputs"][0], sig["outputs"][0]
    return {"summary": "{} {} -> {} {}".format(i["name"], _shape(i["shape"]), o["name"], _shape(o["shape"])), "signature": sig}


def _shape(dims):
    return "[" + ",".join("?" if d is None else str(d) for d in dims) + "]"
