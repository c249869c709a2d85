package engine

func (cubeRuntime) sized() bool { return true }

func (cubeRuntime) details(w *World) []Detail {
	if w.Cube == nil {
		return nil
	}
	return []Detail{{"sandbox", w.Cube.SandboxID}, {"template", w.Cube.Template}}
}
