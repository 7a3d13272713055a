package apiserver

import (
	"runtime"
	"strconv"

	apimachineryversion "k8s.io/apimachinery/pkg/version"
	basecompatibility "k8s.io/component-base/compatibility"

	"github.com/bindery-dev/bindery/internal/version"
)

// reportedVersion is the effective version k8s.io/apiserver runs with
// (which decides the library's features and API defaults), reporting
// Bindery's own version at /version instead of the library's unset
// v0.0.0-master+$Format:%H$, which kubectl version cannot parse.
type reportedVersion struct {
	basecompatibility.EffectiveVersion
	info apimachineryversion.Info
}

func newReportedVersion(effective basecompatibility.EffectiveVersion, v string) reportedVersion {
	info := apimachineryversion.Info{
		GitVersion: v,
		GoVersion:  runtime.Version(),
		Compiler:   runtime.Compiler,
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
	if sv, err := version.Parse(v); err == nil {
		info.Major, info.Minor = strconv.FormatUint(uint64(sv.Major()), 10), strconv.FormatUint(uint64(sv.Minor()), 10)
	}
	return reportedVersion{EffectiveVersion: effective, info: info}
}

// Info is what /version answers.
func (v reportedVersion) Info() *apimachineryversion.Info {
	info := v.info
	return &info
}
