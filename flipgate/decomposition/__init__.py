"""The readout decomposition suite (docs/definitions.md §8; flipbench): each (model, dataset,
axis) cell shows the items under every variant of the axis, reads each answer out with every
readout, and splits each readout's flip rate into the genuine part (under the reference readout
e*, regex over the generated text) and the readout artifact, with paired bootstrap CIs."""
