package engine

func (cubeRuntime) Sized() bool { return true }

func (cubeRuntime) Details(w *World) []Detail {
	if w.Cube == nil {
		return nil
	}
	return []Detail{{Label: "sandbox", Value: w.Cube.SandboxID}, {Label: "template", Value: w.Cube.Template}}
}
