// Package converttest holds Cluster API objects as a management cluster on
// Cluster API v1.10 (contract v1beta1) serves them, for the tests of package
// convert and of whatever converts them: one small classic cluster with a
// MachineDeployment and a MachinePool, one ClusterClass with its templates
// and a Cluster of that class,
// and the add-ons, IPAM and runtime kinds, every one with the status its
// controllers wrote, owner references, labels and references that carry
// their apiVersions, durations and booleans written the way that release
// writes them. It is test data only.
package converttest

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// Namespace is the namespace of the objects' text; Objects puts them in
// the one it is given.
const Namespace = "fleet"

// Objects returns the objects at their v1beta1 (ExtensionConfig: v1alpha1)
// version, in the order a move creates them (every owner before what it
// owns), in namespace ns. The owner references carry the UIDs of their
// owners in the list (metadata.uid), which a test that creates them must
// replace with those the API server gives.
func Objects(ns string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(objects, "\n---\n") {
		// The namespace is every value "fleet" of the text: metadata,
		// references, a topology's class and a selector.
		doc = strings.ReplaceAll(doc+"\n", ": "+Namespace+"\n", ": "+ns+"\n")
		// Through JSON, as a client decodes what an API server serves:
		// whole numbers become int64, not float64.
		data, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			panic(fmt.Sprintf("converttest: a fixture is not YAML: %v\n%s", err, doc))
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			panic(fmt.Sprintf("converttest: a fixture is not an object: %v\n%s", err, doc))
		}
		out = append(out, u)
	}
	return out
}

// referenceVersions are the versions a v1.10 cluster stores the kinds the
// objects reference at.
var referenceVersions = map[schema.GroupKind]string{
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "DockerCluster"}:             "v1beta1",
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "DockerClusterTemplate"}:     "v1beta1",
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "DockerMachine"}:             "v1beta1",
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "DockerMachineTemplate"}:     "v1beta1",
	{Group: "infrastructure.cluster.x-k8s.io", Kind: "DockerMachinePool"}:         "v1beta1",
	{Group: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfig"}:                  "v1beta1",
	{Group: "bootstrap.cluster.x-k8s.io", Kind: "KubeadmConfigTemplate"}:          "v1beta1",
	{Group: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlane"}:         "v1beta1",
	{Group: "controlplane.cluster.x-k8s.io", Kind: "KubeadmControlPlaneTemplate"}: "v1beta1",
}

// ReferenceVersions answers as a v1.10 cluster's CRDs would the version of
// every kind the objects reference (a convert.ReferenceVersions), so that
// the way back restores the references as the objects wrote them.
func ReferenceVersions(_ context.Context, gk schema.GroupKind) (string, error) {
	v, ok := referenceVersions[gk]
	if !ok {
		return "", fmt.Errorf("converttest: no version for %s", gk)
	}
	return schema.GroupVersion{Group: gk.Group, Version: v}.String(), nil
}

// objects are YAML documents, as `kubectl get -o yaml` prints them from a
// Cluster API v1.10.9 management cluster (managedFields left out).
const objects = `apiVersion: cluster.x-k8s.io/v1beta1
kind: ClusterClass
metadata:
  name: quick-start
  namespace: fleet
  uid: 5b0c0a52-0000-4000-8000-000000000001
  resourceVersion: "1001"
  generation: 1
  creationTimestamp: "2026-04-01T09:00:00Z"
  labels:
    team: platform
  annotations:
    cluster.x-k8s.io/paused: ""
spec:
  controlPlane:
    ref:
      apiVersion: controlplane.cluster.x-k8s.io/v1beta1
      kind: KubeadmControlPlaneTemplate
      name: quick-start-control-plane
      namespace: fleet
    machineInfrastructure:
      ref:
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
        kind: DockerMachineTemplate
        name: quick-start-control-plane
        namespace: fleet
    nodeDrainTimeout: 5m0s
    machineHealthCheck:
      maxUnhealthy: 33%
      nodeStartupTimeout: 10m0s
      unhealthyConditions:
      - type: Ready
        status: Unknown
        timeout: 5m0s
      - type: Ready
        status: "False"
        timeout: 5m0s
  infrastructure:
    ref:
      apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
      kind: DockerClusterTemplate
      name: quick-start-cluster
      namespace: fleet
  workers:
    machineDeployments:
    - class: default-worker
      template:
        bootstrap:
          ref:
            apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
            kind: KubeadmConfigTemplate
            name: quick-start-md-default-worker
            namespace: fleet
        infrastructure:
          ref:
            apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
            kind: DockerMachineTemplate
            name: quick-start-md-default-worker
            namespace: fleet
        metadata:
          labels:
            pool: default
      namingStrategy:
        template: '{{ .cluster.name }}-{{ .machineDeployment.topologyName }}-{{ .random }}'
      strategy:
        type: RollingUpdate
        rollingUpdate:
          maxSurge: 1
          maxUnavailable: 0
  variables:
  - name: imageRepository
    required: true
    schema:
      openAPIV3Schema:
        type: string
        default: registry.k8s.io
        description: The container registry the images come from.
  patches:
  - name: imageRepository
    definitions:
    - selector:
        apiVersion: controlplane.cluster.x-k8s.io/v1beta1
        kind: KubeadmControlPlaneTemplate
        matchResources:
          controlPlane: true
      jsonPatches:
      - op: add
        path: /spec/template/spec/kubeadmConfigSpec/clusterConfiguration/imageRepository
        valueFrom:
          variable: imageRepository
status:
  observedGeneration: 1
  variables:
  - name: imageRepository
    definitions:
    - from: inline
      required: true
      schema:
        openAPIV3Schema:
          type: string
          default: registry.k8s.io
          description: The container registry the images come from.
  conditions:
  - type: Ready
    status: "True"
    lastTransitionTime: "2026-04-01T09:00:05Z"
  - type: RefVersionsUpToDate
    status: "True"
    lastTransitionTime: "2026-04-01T09:00:05Z"
  - type: VariablesReconciled
    status: "True"
    lastTransitionTime: "2026-04-01T09:00:05Z"
  v1beta2:
    conditions:
    - type: VariablesReady
      status: "True"
      reason: VariablesReady
      message: ""
      observedGeneration: 1
      lastTransitionTime: "2026-04-01T09:00:05Z"
    - type: RefVersionsUpToDate
      status: "True"
      reason: RefVersionsUpToDate
      message: ""
      observedGeneration: 1
      lastTransitionTime: "2026-04-01T09:00:05Z"
    - type: Paused
      status: "False"
      reason: NotPaused
      message: ""
      observedGeneration: 1
      lastTransitionTime: "2026-04-01T09:00:05Z"
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta1
kind: KubeadmControlPlaneTemplate
metadata:
  name: quick-start-control-plane
  namespace: fleet
  uid: 5b0c0a52-0000-4000-8000-000000000002
  resourceVersion: "1002"
  generation: 1
  creationTimestamp: "2026-04-01T09:00:00Z"
  ownerReferences:
  - apiVersion: cluster.x-k8s.io/v1beta1
    kind: ClusterClass
    name: quick-start
    uid: 5b0c0a52-0000-4000-8000-000000000001
spec:
  template:
    spec:
      machineTemplate:
        nodeDrainTimeout: 1m0s
      rolloutStrategy:
        type: RollingUpdate
        rollingUpdate:
          maxSurge: 1
      kubeadmConfigSpec:
        clusterConfiguration:
          apiServer:
            certSANs:
            - localhost
            - 127.0.0.1
            extraArgs:
              audit-log-maxage: "30"
          controllerManager:
            extraArgs:
              enable-hostpath-provisioner: "true"
        initConfiguration:
          nodeRegistration:
            criSocket: unix:///var/run/containerd/containerd.sock
            kubeletExtraArgs:
              eviction-hard: nodefs.available<0%,imagefs.available<0%
        joinConfiguration:
          nodeRegistration:
            criSocket: unix:///var/run/containerd/containerd.sock
            kubeletExtraArgs:
              eviction-hard: nodefs.available<0%,imagefs.available<0%
        format: cloud-config
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
kind: KubeadmConfigTemplate
metadata:
  name: quick-start-md-default-worker
  namespace: fleet
  uid: 5b0c0a52-0000-4000-8000-000000000003
  resourceVersion: "1003"
  generation: 1
  creationTimestamp: "2026-04-01T09:00:00Z"
  ownerReferences:
  - apiVersion: cluster.x-k8s.io/v1beta1
    kind: ClusterClass
    name: quick-start
    uid: 5b0c0a52-0000-4000-8000-000000000001
spec:
  template:
    spec:
      joinConfiguration:
        nodeRegistration:
          criSocket: unix:///var/run/containerd/containerd.sock
          kubeletExtraArgs:
            eviction-hard: nodefs.available<0%,imagefs.available<0%
      format: cloud-config
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata:
  name: edge
  namespace: fleet
  uid: 5b0c0a52-0000-4000-8000-000000000004
  resourceVersion: "1004"
  generation: 2
  creationTimestamp: "2026-04-01T09:00:30Z"
  labels:
    env: edge
    topology.cluster.x-k8s.io/owned: ""
  finalizers:
  - cluster.cluster.x-k8s.io
spec:
  clusterNetwork:
    pods:
      cidrBlocks:
      - 192.168.0.0/16
    serviceDomain: cluster.local
  controlPlaneEndpoint:
    host: 172.18.0.9
    port: 6443
  controlPlaneRef:
    apiVersion: controlplane.cluster.x-k8s.io/v1beta1
    kind: KubeadmControlPlane
    name: edge-x7k2p
    namespace: fleet
  infrastructureRef:
    apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
    kind: DockerCluster
    name: edge-9wq4d
    namespace: fleet
  topology:
    class: quick-start
    classNamespace: fleet
    version: v1.33.1
    controlPlane:
      replicas: 1
      metadata:
        labels:
          tier: control-plane
      nodeDeletionTimeout: 10s
    workers:
      machineDeployments:
      - class: default-worker
        name: md-0
        replicas: 2
        failureDomain: fd1
        nodeDrainTimeout: 2m0s
        variables:
          overrides:
          - name: imageRepository
            value: registry.example.com
    variables:
    - name: imageRepository
      value: registry.k8s.io
status:
  phase: Provisioned
  infrastructureReady: true
  controlPlaneReady: true
  observedGeneration: 2
  conditions:
  - type: Ready
    status: "True"
    lastTransitionTime: "2026-04-01T09:05:00Z"
  - type: ControlPlaneInitialized
    status: "True"
    lastTransitionTime: "2026-04-01T09:03:00Z"
  - type: ControlPlaneReady
    status: "True"
    lastTransitionTime: "2026-04-01T09:05:00Z"
  - type: InfrastructureReady
    status: "True"
    lastTransitionTime: "2026-04-01T09:01:30Z"
  - type: TopologyReconciled
    status: "True"
    lastTransitionTime: "2026-04-01T09:05:00Z"
  v1beta2:
    conditions:
    - type: TopologyReconciled
      status: "True"
      reason: ReconcileSucceeded
      message: ""
      observedGeneration: 2
      lastTransitionTime: "2026-04-01T09:05:00Z"
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata:
  name: prod
  namespace: fleet
  uid: 5b0c0a52-0000-4000-8000-000000000010
  resourceVersion: "2001"
  generation: 2
  creationTimestamp: "2026-04-01T09:01:00Z"
  labels:
    env: prod
    cni: calico
  annotations:
    note: the classic cluster of the fixtures
  finalizers:
  - cluster.cluster.x-k8s.io
spec:
  clusterNetwork:
    apiServerPort: 6443
    pods:
      cidrBlocks:
      - 192.168.0.0/16
    services:
      cidrBlocks:
      - 10.128.0.0/12
    serviceDomain: cluster.local
  controlPlaneEndpoint:
    host: 172.18.0.3
    port: 6443
  controlPlaneRef:
    apiVersion: controlplane.cluster.x-k8s.io/v1beta1
    kind: KubeadmControlPlane
    name: prod-control-plane
    namespace: fleet
  infrastructureRef:
    apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
    kind: DockerCluster
    name: prod
    namespace: fleet
status:
  phase: Provisioned
  infrastructureReady: true
  controlPlaneReady: true
  observedGeneration: 2
  failureDomains:
    fd1:
      controlPlane: true
    fd2:
      controlPlane: true
      attributes:
        zone: b
    fd3:
      controlPlane: false
  conditions:
  - type: Ready
    status: "True"
    lastTransitionTime: "2026-04-01T09:05:00Z"
  - type: ControlPlaneInitialized
    status: "True"
    lastTransitionTime: "2026-04-01T09:03:00Z"
  - type: ControlPlaneReady
    status: "True"
    lastTransitionTime: "2026-04-01T09:05:00Z"
  - type: InfrastructureReady
    status: "True"
    lastTransitionTime: "2026-04-01T09:01:30Z"
  v1beta2:
    conditions:
    - type: Available
      status: "True"
      reason: Available
      message: ""
      observedGeneration: 2
      lastTransitionTime: "2026-04-01T09:05:00Z"
    - type: ControlPlaneInitialized
      status: "True"
      reason: Initialized
      message: ""
      observedGeneration: 2
      lastTransitionTime: "2026-04-01T09:03:00Z"
    - type: InfrastructureReady
      status: "True"
      reason: Ready
      message: ""
      observedGeneration: 2
      lastTransitionTime: "2026-04-01T09:01:30Z"
    controlPlane:
      desiredReplicas: 3
      replicas: 3
      upToDateReplicas: 3
      readyReplicas: 3
      availableReplicas: 3
    workers:
      desiredReplicas: 5
      replicas: 5
      upToDateReplicas: 5
      readyReplicas: 5
      availableReplicas: 5
---
apiVersion: controlplane.cluster.x-k8s.io/v1beta1
kind: KubeadmControlPlane
metadata:
  name: prod-control-plane
  namespace: fleet
  uid: 5b0c0a52-0000-4000-8000-000000000011
  resourceVersion: "2002"
  generation: 1
  creationTimestamp: "2026-04-01T09:01:00Z"
  labels:
    cluster.x-k8s.io/cluster-name: prod
  finalizers:
  - kubeadm.controlplane.cluster.x-k8s.io
  ownerReferences:
  - apiVersion: cluster.x-k8s.io/v1beta1
    kind: Cluster
    name: prod
    uid: 5b0c0a52-0000-4000-8000-000000000010
    controller: true
    blockOwnerDeletion: true
spec:
  replicas: 3
  version: v1.33.1
  machineTemplate:
    metadata:
      labels:
        role: control-plane
    infrastructureRef:
      apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
      kind: DockerMachineTemplate
      name: prod-control-plane
      namespace: fleet
    nodeDrainTimeout: 1m0s
    nodeDeletionTimeout: 10s
  rolloutStrategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 1
  kubeadmConfigSpec:
    clusterConfiguration:
      apiServer:
        certSANs:
        - localhost
        - 127.0.0.1
        extraArgs:
          audit-log-maxage: "30"
      controllerManager:
        extraArgs:
          enable-hostpath-provisioner: "true"
      etcd:
        local:
          dataDir: /var/lib/etcddisk/etcd
    initConfiguration:
      nodeRegistration:
        criSocket: unix:///var/run/containerd/containerd.sock
        kubeletExtraArgs:
          eviction-hard: nodefs.available<0%,imagefs.available<0%
    joinConfiguration:
      nodeRegistration:
        criSocket: unix:///var/run/containerd/containerd.sock
        kubeletExtraArgs:
          eviction-hard: nodefs.available<0%,imagefs.available<0%
    files:
    - path: /etc/kubernetes/audit-policy.yaml
      owner: root:root
      permissions: "0600"
      content: |
        apiVersion: audit.k8s.io/v1
        kind: Policy
        rules:
        - level: Metadata
    preKubeadmCommands:
    - echo preparing
    format: cloud-config
status:
  selector: cluster.x-k8s.io/cluster-name=prod,cluster.x-k8s.io/control-plane
  replicas: 3
  version: v1.33.1
  updatedReplicas: 3
  readyReplicas: 3
  unavailableReplicas: 0
  initialized: true
  ready: true
  observedGeneration: 1
  conditions:
  - type: Ready
    status: "True"
    lastTransitionTime: "2026-04-01T09:05:00Z"
  - type: Available
    status: "True"
    lastTransitionTime: "2026-04-01T09:03:00Z"
  - type: CertificatesAvailable
    status: "True"
    lastTransitionTime: "2026-04-01T09:01:10Z"
  - type: MachinesReady
    status: "True"
    lastTransitionTime: "2026-04-01T09:05:00Z"
  v1beta2:
    conditions:
    - type: Available
      status: "True"
      reason: Available
      message: ""
      observedGeneration: 1
      lastTransitionTime: "2026-04-01T09:03:00Z"
    - type: CertificatesAvailable
      status: "True"
      reason: Available
      message: ""
      observedGeneration: 1
      lastTransitionTime: "2026-04-01T09:01:10Z"
    readyReplicas: 3
    availableReplicas: 3
    upToDateReplicas: 3
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
kind: KubeadmConfigTemplate
metadata:
  name: prod-md-0
  namespace: fleet
  uid: 5b0c0a52-0000-4000-8000-000000000012
  resourceVersion: "2003"
  generation: 1
  creationTimestamp: "2026-04-01T09:01:00Z"
  ownerReferences:
  - apiVersion: cluster.x-k8s.io/v1beta1
    kind: Cluster
    name: prod
    uid: 5b0c0a52-0000-4000-8000-000000000010
spec:
  template:
    spec:
      joinConfiguration:
        nodeRegistration:
          criSocket: unix:///var/run/containerd/containerd.sock
          kubeletExtraArgs:
            eviction-hard: nodefs.available<0%,imagefs.available<0%
          taints: []
      preKubeadmCommands:
      - echo joining
      format: cloud-config
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDeployment
metadata:
  name: prod-md-0
  namespace: fleet
  uid: 5b0c0a52-0000-4000-8000-000000000013
  resourceVersion: "2004"
  generation: 3
  creationTimestamp: "2026-04-01T09:01:00Z"
  labels:
    cluster.x-k8s.io/cluster-name: prod
  annotations:
    machinedeployment.clusters.x-k8s.io/revision: "2"
  ownerReferences:
  - apiVersion: cluster.x-k8s.io/v1beta1
    kind: Cluster
    name: prod
    uid: 5b0c0a52-0000-4000-8000-000000000010
spec:
  clusterName: prod
  replicas: 2
  minReadySeconds: 0
  revisionHistoryLimit: 1
  progressDeadlineSeconds: 600
  selector:
    matchLabels:
      cluster.x-k8s.io/cluster-name: prod
      cluster.x-k8s.io/deployment-name: prod-md-0
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 1
      maxUnavailable: 0
      deletePolicy: Oldest
  template:
    metadata:
      labels:
        cluster.x-k8s.io/cluster-name: prod
        cluster.x-k8s.io/deployment-name: prod-md-0
        pool: md-0
    spec:
      clusterName: prod
      version: v1.33.1
      failureDomain: fd2
      nodeDrainTimeout: 2m0s
      nodeVolumeDetachTimeout: 5m0s
      nodeDeletionTimeout: 10s
      bootstrap:
        configRef:
          apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
          kind: KubeadmConfigTemplate
          name: prod-md-0
          namespace: fleet
      infrastructureRef:
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
        kind: DockerMachineTemplate
        name: prod-md-0
        namespace: fleet
status:
  observedGeneration: 3
  selector: cluster.x-k8s.io/cluster-name=prod,cluster.x-k8s.io/deployment-name=prod-md-0
  replicas: 2
  updatedReplicas: 2
  readyReplicas: 2
  availableReplicas: 2
  unavailableReplicas: 0
  phase: Running
  conditions:
  - type: Ready
    status: "True"
    lastTransitionTime: "2026-04-01T09:06:00Z"
  - type: Available
    status: "True"
    lastTransitionTime: "2026-04-01T09:06:00Z"
  - type: MachineSetReady
    status: "True"
    lastTransitionTime: "2026-04-01T09:06:00Z"
  v1beta2:
    conditions:
    - type: Available
      status: "True"
      reason: Available
      message: ""
      observedGeneration: 3
      lastTransitionTime: "2026-04-01T09:06:00Z"
    - type: MachinesReady
      status: "True"
      reason: Ready
      message: ""
      observedGeneration: 3
      lastTransitionTime: "2026-04-01T09:06:00Z"
    readyReplicas: 2
    availableReplicas: 2
    upToDateReplicas: 2
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineSet
metadata:
  name: prod-md-0-7b9c4
  namespace: fleet
  uid: 5b0c0a52-0000-4000-8000-000000000014
  resourceVersion: "2005"
  generation: 2
  creationTimestamp: "2026-04-01T09:01:01Z"
  labels:
    cluster.x-k8s.io/cluster-name: prod
    cluster.x-k8s.io/deployment-name: prod-md-0
    machine-template-hash: "3459628147"
  annotations:
    machinedeployment.clusters.x-k8s.io/desired-replicas: "2"
    machinedeployment.clusters.x-k8s.io/max-replicas: "3"
    machinedeployment.clusters.x-k8s.io/revision: "2"
  ownerReferences:
  - apiVersion: cluster.x-k8s.io/v1beta1
    kind: MachineDeployment
    name: prod-md-0
    uid: 5b0c0a52-0000-4000-8000-000000000013
    controller: true
    blockOwnerDeletion: true
spec:
  clusterName: prod
  replicas: 2
  deletePolicy: Oldest
  minReadySeconds: 0
  selector:
    matchLabels:
      cluster.x-k8s.io/cluster-name: prod
      cluster.x-k8s.io/deployment-name: prod-md-0
      machine-template-hash: "3459628147"
  template:
    metadata:
      labels:
        cluster.x-k8s.io/cluster-name: prod
        cluster.x-k8s.io/deployment-name: prod-md-0
        machine-template-hash: "3459628147"
        pool: md-0
    spec:
      clusterName: prod
      version: v1.33.1
      failureDomain: fd2
      nodeDrainTimeout: 2m0s
      nodeVolumeDetachTimeout: 5m0s
      nodeDeletionTimeout: 10s
      bootstrap:
        configRef:
          apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
          kind: KubeadmConfigTemplate
          name: prod-md-0
          namespace: fleet
      infrastructureRef:
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
        kind: DockerMachineTemplate
        name: prod-md-0
        namespace: fleet
status:
  observedGeneration: 2
  selector: cluster.x-k8s.io/cluster-name=prod,cluster.x-k8s.io/deployment-name=prod-md-0,machine-template-hash=3459628147
  replicas: 2
  fullyLabeledReplicas: 2
  readyReplicas: 2
  availableReplicas: 2
  conditions:
  - type: Ready
    status: "True"
    lastTransitionTime: "2026-04-01T09:06:00Z"
  - type: MachinesCreated
    status: "True"
    lastTransitionTime: "2026-04-01T09:02:00Z"
  - type: MachinesReady
    status: "True"
    lastTransitionTime: "2026-04-01T09:06:00Z"
  - type: Resized
    status: "True"
    lastTransitionTime: "2026-04-01T09:02:00Z"
  v1beta2:
    conditions:
    - type: MachinesReady
      status: "True"
      reason: Ready
      message: ""
      observedGeneration: 2
      lastTransitionTime: "2026-04-01T09:06:00Z"
    readyReplicas: 2
    availableReplicas: 2
    upToDateReplicas: 2
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: Machine
metadata:
  name: prod-md-0-7b9c4-xk2lp
  namespace: fleet
  uid: 5b0c0a52-0000-4000-8000-000000000015
  resourceVersion: "2006"
  generation: 2
  creationTimestamp: "2026-04-01T09:02:00Z"
  labels:
    cluster.x-k8s.io/cluster-name: prod
    cluster.x-k8s.io/deployment-name: prod-md-0
    cluster.x-k8s.io/set-name: prod-md-0-7b9c4
    machine-template-hash: "3459628147"
    pool: md-0
  finalizers:
  - machine.cluster.x-k8s.io
  ownerReferences:
  - apiVersion: cluster.x-k8s.io/v1beta1
    kind: MachineSet
    name: prod-md-0-7b9c4
    uid: 5b0c0a52-0000-4000-8000-000000000014
    controller: true
    blockOwnerDeletion: true
spec:
  clusterName: prod
  version: v1.33.1
  providerID: docker:////prod-md-0-7b9c4-xk2lp
  failureDomain: fd2
  nodeDrainTimeout: 2m0s
  nodeVolumeDetachTimeout: 5m0s
  nodeDeletionTimeout: 10s
  bootstrap:
    configRef:
      apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
      kind: KubeadmConfig
      name: prod-md-0-7b9c4-xk2lp
      namespace: fleet
    dataSecretName: prod-md-0-7b9c4-xk2lp
  infrastructureRef:
    apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
    kind: DockerMachine
    name: prod-md-0-7b9c4-xk2lp
    namespace: fleet
status:
  phase: Running
  bootstrapReady: true
  infrastructureReady: true
  observedGeneration: 2
  lastUpdated: "2026-04-01T09:04:00Z"
  nodeRef:
    apiVersion: v1
    kind: Node
    name: prod-md-0-7b9c4-xk2lp
    uid: 0c6b5bd8-0000-4000-8000-000000000001
  addresses:
  - type: Hostname
    address: prod-md-0-7b9c4-xk2lp
  - type: InternalIP
    address: 172.18.0.7
  nodeInfo:
    architecture: amd64
    bootID: 4f1b2c3d-0000-4000-8000-000000000001
    containerRuntimeVersion: containerd://2.1.1
    kernelVersion: 6.8.0-60-generic
    kubeProxyVersion: v1.33.1
    kubeletVersion: v1.33.1
    machineID: 2a3b4c5d6e7f
    operatingSystem: linux
    osImage: Debian GNU/Linux 12 (bookworm)
    systemUUID: 2a3b4c5d-0000-4000-8000-000000000001
  conditions:
  - type: Ready
    status: "True"
    lastTransitionTime: "2026-04-01T09:04:00Z"
  - type: BootstrapReady
    status: "True"
    lastTransitionTime: "2026-04-01T09:02:10Z"
  - type: HealthCheckSucceeded
    status: "True"
    lastTransitionTime: "2026-04-01T09:04:30Z"
  - type: InfrastructureReady
    status: "True"
    lastTransitionTime: "2026-04-01T09:03:00Z"
  - type: NodeHealthy
    status: "True"
    lastTransitionTime: "2026-04-01T09:04:00Z"
  v1beta2:
    conditions:
    - type: Available
      status: "True"
      reason: Available
      message: ""
      observedGeneration: 2
      lastTransitionTime: "2026-04-01T09:04:00Z"
    - type: Ready
      status: "True"
      reason: Ready
      message: ""
      observedGeneration: 2
      lastTransitionTime: "2026-04-01T09:04:00Z"
    - type: NodeHealthy
      status: "True"
      reason: NodeHealthy
      message: ""
      observedGeneration: 2
      lastTransitionTime: "2026-04-01T09:04:00Z"
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
kind: KubeadmConfig
metadata:
  name: prod-md-0-7b9c4-xk2lp
  namespace: fleet
  uid: 5b0c0a52-0000-4000-8000-000000000016
  resourceVersion: "2007"
  generation: 1
  creationTimestamp: "2026-04-01T09:02:00Z"
  labels:
    cluster.x-k8s.io/cluster-name: prod
    cluster.x-k8s.io/deployment-name: prod-md-0
  annotations:
    cluster.x-k8s.io/cloned-from-name: prod-md-0
    cluster.x-k8s.io/cloned-from-groupkind: KubeadmConfigTemplate.bootstrap.cluster.x-k8s.io
  ownerReferences:
  - apiVersion: cluster.x-k8s.io/v1beta1
    kind: Machine
    name: prod-md-0-7b9c4-xk2lp
    uid: 5b0c0a52-0000-4000-8000-000000000015
    controller: true
    blockOwnerDeletion: true
spec:
  joinConfiguration:
    discovery:
      bootstrapToken:
        apiServerEndpoint: 172.18.0.3:6443
        caCertHashes:
        - sha256:45db6bb8e32f8a07f5bd7f7a2ab1c9f3d2a0cf7e8e1f6d0f0b1c2d3e4f5a6b7c
        token: abcdef.0123456789abcdef
        unsafeSkipCAVerification: false
    nodeRegistration:
      criSocket: unix:///var/run/containerd/containerd.sock
      kubeletExtraArgs:
        eviction-hard: nodefs.available<0%,imagefs.available<0%
      name: prod-md-0-7b9c4-xk2lp
  files:
  - path: /etc/motd
    content: managed by Cluster API
    permissions: "0644"
  preKubeadmCommands:
  - echo joining
  format: cloud-config
status:
  ready: true
  dataSecretName: prod-md-0-7b9c4-xk2lp
  observedGeneration: 1
  conditions:
  - type: Ready
    status: "True"
    lastTransitionTime: "2026-04-01T09:02:10Z"
  - type: CertificatesAvailable
    status: "True"
    lastTransitionTime: "2026-04-01T09:02:05Z"
  - type: DataSecretAvailable
    status: "True"
    lastTransitionTime: "2026-04-01T09:02:10Z"
  v1beta2:
    conditions:
    - type: Ready
      status: "True"
      reason: Ready
      message: ""
      observedGeneration: 1
      lastTransitionTime: "2026-04-01T09:02:10Z"
    - type: DataSecretAvailable
      status: "True"
      reason: Available
      message: ""
      observedGeneration: 1
      lastTransitionTime: "2026-04-01T09:02:10Z"
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineHealthCheck
metadata:
  name: prod-md-0-unhealthy
  namespace: fleet
  uid: 5b0c0a52-0000-4000-8000-000000000017
  resourceVersion: "2008"
  generation: 1
  creationTimestamp: "2026-04-01T09:01:00Z"
  labels:
    cluster.x-k8s.io/cluster-name: prod
  ownerReferences:
  - apiVersion: cluster.x-k8s.io/v1beta1
    kind: Cluster
    name: prod
    uid: 5b0c0a52-0000-4000-8000-000000000010
spec:
  clusterName: prod
  selector:
    matchLabels:
      cluster.x-k8s.io/deployment-name: prod-md-0
  maxUnhealthy: 40%
  nodeStartupTimeout: 10m0s
  unhealthyConditions:
  - type: Ready
    status: Unknown
    timeout: 5m0s
  - type: Ready
    status: "False"
    timeout: 5m0s
  unhealthyMachineConditions:
  - type: InfrastructureReady
    status: "False"
    timeout: 10m0s
status:
  expectedMachines: 2
  currentHealthy: 2
  remediationsAllowed: 1
  observedGeneration: 1
  targets:
  - prod-md-0-7b9c4-xk2lp
  - prod-md-0-7b9c4-zq8nw
  conditions:
  - type: RemediationAllowed
    status: "True"
    lastTransitionTime: "2026-04-01T09:04:30Z"
  v1beta2:
    conditions:
    - type: RemediationAllowed
      status: "True"
      reason: RemediationAllowed
      message: ""
      observedGeneration: 1
      lastTransitionTime: "2026-04-01T09:04:30Z"
---
apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
kind: KubeadmConfig
metadata:
  name: prod-mp-0
  namespace: fleet
  uid: 5b0c0a52-0000-4000-8000-000000000018
  resourceVersion: "2009"
  generation: 1
  creationTimestamp: "2026-04-01T09:01:00Z"
  labels:
    cluster.x-k8s.io/cluster-name: prod
  ownerReferences:
  - apiVersion: cluster.x-k8s.io/v1beta1
    kind: Cluster
    name: prod
    uid: 5b0c0a52-0000-4000-8000-000000000010
spec:
  joinConfiguration:
    nodeRegistration:
      kubeletExtraArgs:
        node-labels: pool=mp-0
  format: cloud-config
status:
  ready: true
  dataSecretName: prod-mp-0
  observedGeneration: 1
  conditions:
  - type: Ready
    status: "True"
    lastTransitionTime: "2026-04-01T09:02:10Z"
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachinePool
metadata:
  name: prod-mp-0
  namespace: fleet
  uid: 5b0c0a52-0000-4000-8000-000000000019
  resourceVersion: "2010"
  generation: 1
  creationTimestamp: "2026-04-01T09:01:00Z"
  labels:
    cluster.x-k8s.io/cluster-name: prod
  finalizers:
  - machinepool.cluster.x-k8s.io
  ownerReferences:
  - apiVersion: cluster.x-k8s.io/v1beta1
    kind: Cluster
    name: prod
    uid: 5b0c0a52-0000-4000-8000-000000000010
spec:
  clusterName: prod
  replicas: 3
  minReadySeconds: 30
  failureDomains:
  - fd1
  - fd2
  providerIDList:
  - docker:////prod-mp-0-0
  - docker:////prod-mp-0-1
  - docker:////prod-mp-0-2
  template:
    metadata:
      labels:
        pool: mp-0
    spec:
      clusterName: prod
      version: v1.33.1
      nodeDrainTimeout: 2m0s
      nodeDeletionTimeout: 10s
      bootstrap:
        configRef:
          apiVersion: bootstrap.cluster.x-k8s.io/v1beta1
          kind: KubeadmConfig
          name: prod-mp-0
          namespace: fleet
        dataSecretName: prod-mp-0
      infrastructureRef:
        apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
        kind: DockerMachinePool
        name: prod-mp-0
        namespace: fleet
status:
  phase: Running
  replicas: 3
  readyReplicas: 3
  availableReplicas: 3
  unavailableReplicas: 0
  bootstrapReady: true
  infrastructureReady: true
  observedGeneration: 1
  nodeRefs:
  - apiVersion: v1
    kind: Node
    name: prod-mp-0-0
    uid: 0c6b5bd8-0000-4000-8000-000000000010
  - apiVersion: v1
    kind: Node
    name: prod-mp-0-1
    uid: 0c6b5bd8-0000-4000-8000-000000000011
  - apiVersion: v1
    kind: Node
    name: prod-mp-0-2
    uid: 0c6b5bd8-0000-4000-8000-000000000012
  conditions:
  - type: Ready
    status: "True"
    lastTransitionTime: "2026-04-01T09:05:00Z"
  - type: BootstrapReady
    status: "True"
    lastTransitionTime: "2026-04-01T09:02:10Z"
  - type: InfrastructureReady
    status: "True"
    lastTransitionTime: "2026-04-01T09:04:00Z"
  - type: ReplicasReady
    status: "True"
    lastTransitionTime: "2026-04-01T09:05:00Z"
  v1beta2:
    conditions:
    - type: Available
      status: "True"
      reason: Available
      message: ""
      observedGeneration: 1
      lastTransitionTime: "2026-04-01T09:05:00Z"
    readyReplicas: 3
    availableReplicas: 3
    upToDateReplicas: 3
---
apiVersion: addons.cluster.x-k8s.io/v1beta1
kind: ClusterResourceSet
metadata:
  name: calico
  namespace: fleet
  uid: 5b0c0a52-0000-4000-8000-000000000020
  resourceVersion: "2011"
  generation: 1
  creationTimestamp: "2026-04-01T09:00:00Z"
  finalizers:
  - addons.cluster.x-k8s.io
spec:
  clusterSelector:
    matchLabels:
      cni: calico
  resources:
  - kind: ConfigMap
    name: calico-manifests
  - kind: Secret
    name: calico-credentials
  strategy: Reconcile
status:
  observedGeneration: 1
  conditions:
  - type: ResourcesApplied
    status: "True"
    lastTransitionTime: "2026-04-01T09:05:30Z"
  v1beta2:
    conditions:
    - type: ResourcesApplied
      status: "True"
      reason: Applied
      message: ""
      observedGeneration: 1
      lastTransitionTime: "2026-04-01T09:05:30Z"
---
apiVersion: addons.cluster.x-k8s.io/v1beta1
kind: ClusterResourceSetBinding
metadata:
  name: prod
  namespace: fleet
  uid: 5b0c0a52-0000-4000-8000-000000000021
  resourceVersion: "2012"
  generation: 1
  creationTimestamp: "2026-04-01T09:05:30Z"
  labels:
    cluster.x-k8s.io/cluster-name: prod
  ownerReferences:
  - apiVersion: addons.cluster.x-k8s.io/v1beta1
    kind: ClusterResourceSet
    name: calico
    uid: 5b0c0a52-0000-4000-8000-000000000020
spec:
  clusterName: prod
  bindings:
  - clusterResourceSetName: calico
    resources:
    - kind: ConfigMap
      name: calico-manifests
      applied: true
      hash: sha256:3b1e5c7d
      lastAppliedTime: "2026-04-01T09:05:30Z"
    - kind: Secret
      name: calico-credentials
      applied: true
      hash: sha256:9a8f7e6d
      lastAppliedTime: "2026-04-01T09:05:30Z"
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: MachineDrainRule
metadata:
  name: skip-storage
  namespace: fleet
  uid: 5b0c0a52-0000-4000-8000-000000000022
  resourceVersion: "2013"
  generation: 1
  creationTimestamp: "2026-04-01T09:00:00Z"
spec:
  drain:
    behavior: Drain
    order: 100
  machines:
  - selector:
      matchLabels:
        pool: md-0
    clusterSelector:
      matchLabels:
        env: prod
  pods:
  - selector:
      matchLabels:
        app: storage
    namespaceSelector:
      matchLabels:
        kubernetes.io/metadata.name: storage
---
apiVersion: ipam.cluster.x-k8s.io/v1beta1
kind: IPAddressClaim
metadata:
  name: prod-md-0-7b9c4-xk2lp-eth0
  namespace: fleet
  uid: 5b0c0a52-0000-4000-8000-000000000023
  resourceVersion: "2014"
  generation: 1
  creationTimestamp: "2026-04-01T09:02:00Z"
  labels:
    cluster.x-k8s.io/cluster-name: prod
  finalizers:
  - ipam.cluster.x-k8s.io/ReleaseAddress
spec:
  clusterName: prod
  poolRef:
    apiGroup: ipam.cluster.x-k8s.io
    kind: InClusterIPPool
    name: prod-pool
status:
  addressRef:
    name: prod-md-0-7b9c4-xk2lp-eth0
  conditions:
  - type: Ready
    status: "True"
    lastTransitionTime: "2026-04-01T09:02:01Z"
  v1beta2:
    conditions:
    - type: Ready
      status: "True"
      reason: Ready
      message: ""
      observedGeneration: 1
      lastTransitionTime: "2026-04-01T09:02:01Z"
---
apiVersion: ipam.cluster.x-k8s.io/v1beta1
kind: IPAddress
metadata:
  name: prod-md-0-7b9c4-xk2lp-eth0
  namespace: fleet
  uid: 5b0c0a52-0000-4000-8000-000000000024
  resourceVersion: "2015"
  generation: 1
  creationTimestamp: "2026-04-01T09:02:01Z"
  ownerReferences:
  - apiVersion: ipam.cluster.x-k8s.io/v1beta1
    kind: IPAddressClaim
    name: prod-md-0-7b9c4-xk2lp-eth0
    uid: 5b0c0a52-0000-4000-8000-000000000023
    controller: true
    blockOwnerDeletion: true
spec:
  address: 10.10.0.17
  prefix: 24
  gateway: 10.10.0.1
  claimRef:
    name: prod-md-0-7b9c4-xk2lp-eth0
  poolRef:
    apiGroup: ipam.cluster.x-k8s.io
    kind: InClusterIPPool
    name: prod-pool
---
apiVersion: runtime.cluster.x-k8s.io/v1alpha1
kind: ExtensionConfig
metadata:
  name: lifecycle-hooks
  uid: 5b0c0a52-0000-4000-8000-000000000025
  resourceVersion: "2016"
  generation: 1
  creationTimestamp: "2026-04-01T09:00:00Z"
spec:
  clientConfig:
    service:
      name: lifecycle-hooks
      namespace: fleet
      port: 443
  namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: fleet
  settings:
    defaultAllHandlersToBlocking: "true"
status:
  handlers:
  - name: before-cluster-create.lifecycle-hooks
    requestHook:
      apiVersion: hooks.runtime.cluster.x-k8s.io/v1alpha1
      hook: BeforeClusterCreate
    timeoutSeconds: 10
    failurePolicy: Fail
  conditions:
  - type: Discovered
    status: "True"
    lastTransitionTime: "2026-04-01T09:00:10Z"
  v1beta2:
    conditions:
    - type: Discovered
      status: "True"
      reason: Discovered
      message: ""
      observedGeneration: 1
      lastTransitionTime: "2026-04-01T09:00:10Z"`
