package cuberun

func (r *Runtime) Sized() bool { return true }

func (r *Runtime) Details(w *World) []Detail {
	if w.Cube == nil {
		return nil
	}
	return []Detail{{Label: "sandbox", Value: w.Cube.SandboxID}, {Label: "template", Value: w.Cube.Template}}
}
