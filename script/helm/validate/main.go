// Command validate checks Kubernetes manifests against the Kubernetes API
// types, as CI's stand-in for kubeconform (whose JSON schemas are
// downloaded from GitHub, which CI cannot reach; the types here are the
// ones those schemas are generated from, fetched as Go modules).
//
// It reads a multi-document YAML stream (what `helm template` prints) on
// standard input. Each document must name an apiVersion and kind it knows
// and decode strictly into that type: an unknown field, a field of the
// wrong type or a duplicate field is an error. Then a few checks the API
// server would make: object names are DNS-1123, ports are in range, a
// StatefulSet's selector matches its pod labels and names a Service that
// exists, container volume mounts name a volume or claim template, and
// Services select pods that exist. It prints one line per object and exits
// non-zero on the first stream with an error.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func newDecoder() (*json.Serializer, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme,
		networkingv1.AddToScheme, monitoringv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, err
		}
	}
	return json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme, scheme,
		json.SerializerOptions{Yaml: true, Strict: true}), nil
}

func run(in io.Reader, out io.Writer) error {
	dec, err := newDecoder()
	if err != nil {
		return err
	}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(in))
	var objects []runtime.Object
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		obj, gvk, err := dec.Decode(doc, nil, nil)
		if err != nil {
			return fmt.Errorf("%s: %w", firstLines(doc), err)
		}
		if err := check(obj); err != nil {
			return fmt.Errorf("%s %s: %w", gvk.Kind, name(obj), err)
		}
		fmt.Fprintf(out, "ok %s %s\n", gvk.Kind, name(obj))
		objects = append(objects, obj)
	}
	if len(objects) == 0 {
		return errors.New("no manifest in the input")
	}
	return crossCheck(objects)
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, l := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.Bytes()
}

func firstLines(doc []byte) string {
	lines := strings.SplitN(string(doc), "\n", 4)
	if len(lines) > 3 {
		lines = lines[:3]
	}
	return strings.Join(lines, " | ")
}

func name(obj runtime.Object) string {
	if m, ok := obj.(interface{ GetName() string }); ok {
		return m.GetName()
	}
	return "?"
}

func dns1123(what, s string) error {
	if errs := validation.IsDNS1123Subdomain(s); len(errs) > 0 {
		return fmt.Errorf("%s %q: %s", what, s, strings.Join(errs, "; "))
	}
	return nil
}

func checkPod(spec corev1.PodSpec, claims []string) error {
	if len(spec.Containers) == 0 {
		return errors.New("no container")
	}
	vols := map[string]bool{}
	for _, v := range spec.Volumes {
		vols[v.Name] = true
	}
	for _, c := range claims {
		vols[c] = true
	}
	for _, c := range spec.Containers {
		if errs := validation.IsDNS1123Label(c.Name); len(errs) > 0 {
			return fmt.Errorf("container name %q: %s", c.Name, strings.Join(errs, "; "))
		}
		if c.Image == "" {
			return fmt.Errorf("container %s has no image", c.Name)
		}
		for _, p := range c.Ports {
			if p.ContainerPort < 1 || p.ContainerPort > 65535 {
				return fmt.Errorf("container %s: port %d out of range", c.Name, p.ContainerPort)
			}
			if errs := validation.IsValidPortName(p.Name); p.Name != "" && len(errs) > 0 {
				return fmt.Errorf("container %s: port name %q: %s", c.Name, p.Name, strings.Join(errs, "; "))
			}
		}
		for _, m := range c.VolumeMounts {
			if !vols[m.Name] {
				return fmt.Errorf("container %s mounts %q, which is no volume", c.Name, m.Name)
			}
		}
	}
	return nil
}

func check(obj runtime.Object) error {
	if err := dns1123("name", name(obj)); err != nil {
		return err
	}
	switch o := obj.(type) {
	case *appsv1.StatefulSet:
		if o.Spec.Selector == nil {
			return errors.New("no selector")
		}
		sel, err := metav1LabelSelector(o.Spec.Selector.MatchLabels)
		if err != nil {
			return err
		}
		if !sel.Matches(labels.Set(o.Spec.Template.Labels)) {
			return errors.New("the selector does not match the pod template's labels")
		}
		if o.Spec.ServiceName == "" {
			return errors.New("no serviceName")
		}
		var claims []string
		for _, c := range o.Spec.VolumeClaimTemplates {
			claims = append(claims, c.Name)
			if c.Spec.Resources.Requests.Storage().IsZero() {
				return fmt.Errorf("claim template %s requests no storage", c.Name)
			}
		}
		return checkPod(o.Spec.Template.Spec, claims)
	case *batchv1.Job:
		if o.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyOnFailure &&
			o.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
			return errors.New("a Job's pods restart OnFailure or Never")
		}
		return checkPod(o.Spec.Template.Spec, nil)
	case *corev1.Service:
		for _, p := range o.Spec.Ports {
			if p.Port < 1 || p.Port > 65535 {
				return fmt.Errorf("port %d out of range", p.Port)
			}
		}
		if len(o.Spec.Ports) == 0 {
			return errors.New("no port")
		}
	case *corev1.ConfigMap, *corev1.Secret, *networkingv1.Ingress, *monitoringv1.ServiceMonitor:
	default:
		return fmt.Errorf("unexpected kind %T", obj)
	}
	return nil
}

func metav1LabelSelector(m map[string]string) (labels.Selector, error) {
	if len(m) == 0 {
		return nil, errors.New("an empty selector")
	}
	return labels.SelectorFromSet(labels.Set(m)), nil
}

// crossCheck: what the objects say of each other.
func crossCheck(objs []runtime.Object) error {
	services := map[string]*corev1.Service{}
	var podLabels []labels.Set
	configMaps := map[string]bool{}
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Service:
			services[o.Name] = o
		case *appsv1.StatefulSet:
			podLabels = append(podLabels, o.Spec.Template.Labels)
		case *corev1.ConfigMap:
			configMaps[o.Name] = true
		}
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.StatefulSet:
			if _, ok := services[o.Spec.ServiceName]; !ok {
				return fmt.Errorf("StatefulSet %s names Service %s, which is not in the manifests", o.Name, o.Spec.ServiceName)
			}
			if err := volumesExist(o.Name, o.Spec.Template.Spec, configMaps); err != nil {
				return err
			}
		case *batchv1.Job:
			if err := volumesExist(o.Name, o.Spec.Template.Spec, configMaps); err != nil {
				return err
			}
		case *corev1.Service:
			sel := labels.SelectorFromSet(o.Spec.Selector)
			found := false
			for _, l := range podLabels {
				found = found || sel.Matches(l)
			}
			if !found {
				return fmt.Errorf("Service %s selects no pod of the manifests", o.Name)
			}
		case *networkingv1.Ingress:
			for _, r := range o.Spec.Rules {
				for _, p := range r.HTTP.Paths {
					if _, ok := services[p.Backend.Service.Name]; !ok {
						return fmt.Errorf("Ingress %s routes to Service %s, which is not in the manifests", o.Name, p.Backend.Service.Name)
					}
				}
			}
		}
	}
	return nil
}

func volumesExist(owner string, spec corev1.PodSpec, configMaps map[string]bool) error {
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil && !configMaps[v.ConfigMap.Name] {
			return fmt.Errorf("%s mounts ConfigMap %s, which is not in the manifests", owner, v.ConfigMap.Name)
		}
	}
	return nil
}
