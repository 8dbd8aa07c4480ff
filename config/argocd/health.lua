-- Argo CD health check for move.cluster.x-k8s.io/MoveOperation.
--
-- Healthy when the move is Done, Degraded when it Failed or is stalled waiting
-- for a human (Stalled=True: e.g. the target kubeconfig Secret is missing, or
-- restored controllers never became Available), Progressing otherwise. The
-- message says what the operator says: the phase, the progress and the Ready
-- condition's message, or the failure reason and message.
--
-- Install: add this script to the argocd-cm ConfigMap under the key
--   resource.customizations.health.move.cluster.x-k8s.io_MoveOperation
-- (see config/argocd/README.md).

local hs = {}

local function condition(conditions, type)
  if conditions == nil then
    return nil
  end
  for _, c in ipairs(conditions) do
    if c.type == type then
      return c
    end
  end
  return nil
end

local status = obj.status
if status == nil or status.phase == nil or status.phase == "" then
  hs.status = "Progressing"
  hs.message = "Waiting for move-operator to pick up the MoveOperation"
  return hs
end

if obj.metadata ~= nil and obj.metadata.generation ~= nil and status.observedGeneration ~= nil
    and status.observedGeneration < obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for move-operator to observe the latest spec"
  return hs
end

local phase = status.phase
local ready = condition(status.conditions, "Ready")
local stalled = condition(status.conditions, "Stalled")

if phase == "Done" then
  hs.status = "Healthy"
  if ready ~= nil and ready.message ~= nil then
    hs.message = ready.message
  else
    hs.message = "The move completed"
  end
  return hs
end

if phase == "Failed" then
  hs.status = "Degraded"
  local reason = status.failureReason or (ready and ready.reason) or "Failed"
  local message = status.failureMessage or (ready and ready.message) or ""
  hs.message = reason .. ": " .. message
  return hs
end

if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = phase .. ", stalled: " .. (stalled.reason or "") .. ": " .. (stalled.message or "")
  return hs
end

hs.status = "Progressing"
local message = phase
if status.progress ~= nil and status.progress.summary ~= nil and status.progress.summary ~= "" then
  message = message .. " " .. status.progress.summary
end
if ready ~= nil and ready.message ~= nil and ready.message ~= "" then
  message = message .. ": " .. ready.message
end
hs.message = message
return hs
